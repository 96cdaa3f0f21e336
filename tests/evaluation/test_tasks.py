"""embedlab.evaluation (the task list): every registered task declares its datasets, metrics and headline,
and a run on a deterministic fake method emits its headline and only declared metrics."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeMethod

from embedlab.evaluation.alignsim.items import SamplingConfig
from embedlab.evaluation.alignsim.task import AlignSimSetup
from embedlab.evaluation.base import UNDECLARED, Task
from embedlab.evaluation.classification import ClassificationTask
from embedlab.evaluation.clustering import ClusteringTask
from embedlab.evaluation.harness import DEFAULT_DATASETS, TASKS, TASK_FAMILIES, headline_of, metric_of, parse_tasks


def _small_tasks(folder: Path) -> dict[str, list[Task]]:
    """Per family, tasks small enough for a fake method: user files, or small slices of the shared data."""
    scored = folder / "scored.tsv"
    scored.write_text("".join(f"text {k}\tother {k % 5}\t{k % 2}\n" for k in range(12)))
    grouped = folder / "grouped.tsv"
    grouped.write_text("".join(f"{k % 3}\tmember {k}\n" for k in range(12)))
    beir = folder / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(f'{{"_id": "d{k}", "text": "document number {k}"}}\n' for k in range(12)))
    (beir / "queries.jsonl").write_text("".join(f'{{"_id": "q{k}", "text": "query number {k}"}}\n' for k in range(4)))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{k}\td{3 * k}\t1\n" for k in range(4)))
    labelled_pairs = folder / "labelled-pairs.tsv"  # 24 positives: alignment:@FILE needs at least 20
    labelled_pairs.write_text("".join(f"text {k}\tparaphrase {k}\t{k % 2}\n" for k in range(48)))
    labelled = folder / "labelled.tsv"
    labelled.write_text("".join(f"{k % 2}\tsentence number {k}\n" for k in range(24)))
    file_tasks = parse_tasks(f"sts:@{scored},pairs:@{scored},correlations:@{scored},triplets:@{grouped}")
    sampling = SamplingConfig(seed=0, pairs_per_label=4, sentences=4, triplets=4, afin_pairs=4)
    return {
        **{task.name: [task] for task in file_tasks},
        "clustering": [ClusteringTask("labelled", path=str(labelled), runs=2)],
        "classification": [ClassificationTask("labelled", path=str(labelled), folds=2, inner_folds=2)],
        "isotropy": parse_tasks("isotropy"),
        # the default run on STS-B train (uniformity over 60 M pairs of 11 k sentences, ≈ 5 CPU s) is
        # tests/evaluation/test_geometry.py::test_alignment_task_on_stsb_train's; run() is the same code
        "alignment": parse_tasks(f"alignment:@{labelled_pairs}"),
        "alignsim": AlignSimSetup(sampling=sampling).tasks(),
        "retrieval": parse_tasks(f"retrieval:@{beir}", rerank=FakeMethod(spec="fake-pairs", pairwise=True), rerank_depth=3),
    }


def test_every_task_declares_itself() -> None:
    assert list(TASK_FAMILIES) == [task.name for task in TASKS] and len(set(TASK_FAMILIES)) == len(TASKS)
    for family in TASKS:
        assert family.description and family.datasets == DEFAULT_DATASETS[family.name]
        for dataset in family.datasets:
            assert family.metric(family.headline_of(dataset)) is not UNDECLARED, (family.name, dataset)
        for name, metric in family.metrics.items():
            assert metric.description and metric.better in ("higher", "lower", ""), (family.name, name)
            assert metric.style in ("number", "count", "rate")
    assert metric_of("pairs", "error").lower_is_better and not metric_of("sts", "spearman").lower_is_better
    assert metric_of("no-such-task", "x") is UNDECLARED and headline_of("no-such-task", "x") is None


def test_every_task_emits_its_headline_and_only_declared_metrics(tmp_path: Path) -> None:
    small = _small_tasks(tmp_path)
    assert set(small) == set(TASK_FAMILIES)  # a new task needs a small case here
    method = FakeMethod(spec="fake-headlines")
    for family, tasks in small.items():
        for task in tasks:
            records = task.run(method)
            emitted = {r.metric for r in records}
            assert headline_of(family, task.dataset) in emitted, (family, task.dataset)
            undeclared = {m for m in emitted if metric_of(family, m) is UNDECLARED}
            assert not undeclared, (family, task.dataset, undeclared)
            assert {(r.method, r.task, r.dataset) for r in records} == {(method.spec, family, task.dataset)}


def test_options_reach_only_the_tasks_that_declare_them(tmp_path: Path) -> None:
    tasks = parse_tasks("classification:trec,clustering:tweet,triplets:sts,sts:stsb", seed=3, pair_features="full",
                        layout="line")
    by_name = {task.name: task for task in tasks}
    assert by_name["classification"].settings() == {"seed": 3, "pair_features": "full"}
    assert by_name["clustering"].settings() == {"seed": 3}
    assert by_name["triplets"].settings() == {} and by_name["sts"].settings() == {}  # layout: user files only
    class NoFiles(Task):  # every task family takes user files now; the refusal stays for one that does not
        name = "no-files"

    with pytest.raises(ValueError, match="does not take a user file"):
        NoFiles.create(f"@{tmp_path}", {})
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        parse_tasks("nope")
