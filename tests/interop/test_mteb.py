"""An embedlab method run through MTEB itself, on an STS task built from the local STS-B test split, scores
what ``embedlab eval minilm --tasks sts:stsb`` reports (Spearman of cosines, ±0.001)."""

from __future__ import annotations

import importlib.util

import pytest

import embedlab
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.interop.mteb import MTEBEncoder

# mteb (≈ 1.4 CPU s to import) is imported by the test that runs it, not by every xdist worker's collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mteb") is None, reason="mteb is not installed")


def local_stsb_task():
    """An MTEB STS task on STS-B test from the shared data folder: no hub access."""
    from datasets import Dataset, DatasetDict  # mteb brings datasets
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    class LocalSTSB(AbsTaskSTS):
        """STS-B test from the shared data folder."""

        metadata = TaskMetadata(
            type="STS",
            name="LocalSTSB",
            main_score="cosine_spearman",
            description="STS-B test split read from EMBEDLAB_DATA.",
            reference="https://ixa2.si.ehu.eus/stswiki",
            dataset={"path": "local/stsb", "revision": "local"},
            category="t2t",
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            date=("2017-01-01", "2017-12-31"),
            dialect=[],
            domains=[],
            task_subtypes=[],
            license="cc-by-sa-4.0",
            annotations_creators="human-annotated",
            modalities=["text"],
            sample_creation="found",
            bibtex_citation="",
        )
        min_score = 0
        max_score = 5

        def load_data(self, num_proc: int | None = None, **kwargs) -> None:
            from embedlab.data.sts import stsb

            test = stsb("test")
            columns = {"sentence1": list(test.first), "sentence2": list(test.second), "score": test.scores.tolist()}
            self.dataset = DatasetDict({"test": Dataset.from_dict(columns)})
            self.data_loaded = True

    return LocalSTSB()


@pytest.mark.slow
@pytest.mark.crosspath
def test_minilm_through_mteb_scores_the_harness_spearman():
    import mteb

    result = mteb.evaluate(MTEBEncoder("minilm"), local_stsb_task(), cache=None, show_progress_bar=False)
    mteb_spearman = result.task_results[0].scores["test"][0]["cosine_spearman"]
    ours = [r for r in evaluate([embedlab.load("minilm")], parse_tasks("sts:stsb"), log=lambda message: None).records
            if r.metric == "spearman" and r.subset == "test"]
    assert len(ours) == 1
    assert mteb_spearman == pytest.approx(ours[0].value, abs=1e-3)
    assert mteb_spearman == pytest.approx(0.8203, abs=1e-3)  # the documented STS-B number


def test_a_pairwise_method_is_refused():
    with pytest.raises(TypeError, match="pairwise"):
        MTEBEncoder("match:minilm")
