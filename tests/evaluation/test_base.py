"""A user's own model needs nothing beyond ``encode`` to be evaluated (embedlab.evaluation.base.as_method)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.evaluation.base import OwnModel, Task, as_method
from embedlab.evaluation.harness import TASKS, evaluate
from embedlab.evaluation.retrieval import RetrievalTask
from embedlab.evaluation.sts import STSTask
from embedlab.models.loading import resolve_model_path
from tolerance import UNIT_ATOL


class TextsOnly:
    """A model whose encode takes the texts and nothing else."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def encode(self, texts):
        return np.array([[len(text) * self.scale, text.count(" ") + 1.0] for text in texts])


def test_a_model_with_only_encode_gets_a_spec_and_fingerprint() -> None:
    own = as_method(TextsOnly(1.0))
    assert isinstance(own, OwnModel) and not own.pairwise
    assert own.spec.startswith("TextsOnly@") and own.fingerprint == as_method(TextsOnly(1.0)).fingerprint
    assert own.fingerprint != as_method(TextsOnly(2.0)).fingerprint  # another model: other cache keys, other results
    assert own.encode(["a b", "c"], batch_size=8, show_progress_bar=False).dtype == np.float32
    method = embedlab.load("random:minilm")
    assert as_method(method) is method
    with pytest.raises(TypeError, match="no encode"):
        as_method(object())


@pytest.mark.crosspath
def test_a_sentence_transformer_evaluates_like_st_minilm(tmp_path: Path) -> None:
    from embedlab.data.sts import stsb

    data = stsb("test")
    rows = "\n".join(f"{a}\t{b}\t{s}" for a, b, s in list(zip(data.first, data.second, data.scores))[:60])
    (tmp_path / "pairs.tsv").write_text(f"text1\ttext2\tscore\n{rows}\n", encoding="utf-8")
    task = STSTask("pairs", path=str(tmp_path / "pairs.tsv"))
    model = SentenceTransformer(str(resolve_model_path("minilm")))
    theirs = {r.metric: r for r in evaluate([model], [task], log=lambda message: None).records}
    ours = {r.metric: r for r in evaluate([embedlab.load("st:minilm")], [task], log=lambda message: None).records}
    assert theirs["spearman"].method.startswith("SentenceTransformer@")
    assert theirs["spearman"].value == pytest.approx(ours["spearman"].value, abs=UNIT_ATOL)  # cosines equal to float32 rounding


def test_every_declared_metric_has_a_unit_and_shares_are_fractions() -> None:
    from embedlab.evaluation.base import UNITS, Metric
    from embedlab.evaluation.harness import TASKS

    for task in TASKS:
        for name, metric in task.metrics.items():
            assert metric.unit in UNITS, (task.name, name)
            if "accuracy" in name or name in ("error",) or "pass" in name:
                assert metric.unit == "fraction" and "%" not in metric.description, (task.name, name)
    with pytest.raises(ValueError, match="unknown metric unit 'percent'"):
        Metric("share", unit="percent")


def test_every_task_declares_a_headline_metric_it_emits_with_a_direction() -> None:
    assert Task.headline_metric is None  # the base class ranks nothing
    for family in TASKS:
        assert "headline_metric" in vars(family), family.name  # set on the task itself, not inherited
        for dataset in family.datasets:
            headline = family.headline_of(dataset)
            declared = family.metric(headline)
            assert declared.description and declared.better in ("higher", "lower"), (family.name, dataset, headline)
    assert RetrievalTask.headline_metric == "ndcg@10"
