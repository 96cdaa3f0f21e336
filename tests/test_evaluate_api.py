"""Tests for ``embedlab.evaluate`` (embedlab/__init__.py): the Python entry point of an evaluation gives what
``embedlab eval`` gives, from specs or method objects, a selection string or task objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeMethod, isolated_eval_cache  # noqa: F401 (autouse fixture)

import embedlab
from embedlab.cli.app import main
from embedlab.errors import InputError
from embedlab.evaluation.harness import EvaluationRun, parse_tasks
from embedlab.results.database import ResultsDB


@pytest.fixture()
def beir(tmp_path: Path) -> Path:
    """A BEIR folder of 12 documents and 4 judged queries whose words overlap their relevant documents'."""
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    words = ["guitar music", "snow dogs", "stock market", "onion kitchen"]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"{words[i % 4]} story {i}"}) + "\n"
                                               for i in range(12)))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": words[i]}) + "\n" for i in range(4)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(4)))
    return root


def test_evaluate_gives_the_clis_ndcg_at_10(beir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    # both paths load a spec through embedlab.load: a fake model there keeps the test to milliseconds
    monkeypatch.setattr(embedlab, "load", lambda spec: FakeMethod(spec=spec, dim=16))
    spec = "tiny-fake"
    assert main(["eval", spec, "--tasks", f"retrieval:@{beir}", "--no-db", "-q", "--bootstrap", "0", "--format", "json",
                 "--metric", "ndcg@10", "--subset", "all"]) == 0
    (cli,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    db = tmp_path / "api.sqlite"
    run = embedlab.evaluate([spec], f"retrieval:@{beir}", db=db, bootstrap=0)
    assert isinstance(run, EvaluationRun) and run.reused == [] and run.skipped == []
    (ndcg,) = [r for r in run.records if r.metric == "ndcg@10" and r.subset == "all"]
    assert ndcg.value == cli["value"] and 0 < ndcg.value <= 1  # bit-identical: the same vectors, the same trec_eval ranking
    assert ndcg.cost["texts"] == 16 and ndcg.cost["bytes_per_vector"] == 16 * 4
    again = embedlab.evaluate(spec, f"retrieval:@{beir}", db=ResultsDB(db), bootstrap=0)  # the same database: reused
    assert again.reused == [(spec, "retrieval", ndcg.dataset)]
    cut = embedlab.evaluate(spec, f"retrieval:@{beir}", db=db, bootstrap=0, k="10")  # the CLI's --k, as a keyword
    assert {r.settings.get("k") for r in cut.records} == {"10"} and len(ResultsDB(db).records()) > len(run.records)


def test_method_objects_task_objects_and_refusals(beir: Path) -> None:
    method = FakeMethod(spec="api-fake")
    tasks = parse_tasks(f"retrieval:@{beir}", k="1,5")
    run = embedlab.evaluate([method], tasks, db=None, bootstrap=0)
    assert {r.metric for r in run.records} >= {"ndcg@5", "recall@1"} and len(method.encode_calls) == 2  # queries, documents
    with pytest.raises(InputError, match="unknown task option 'kk'"):  # a misspelt option is never silently ignored
        embedlab.evaluate([method], f"retrieval:@{beir}", db=None, kk="10")
    with pytest.raises(InputError, match="go with a task selection"):
        embedlab.evaluate([method], tasks, db=None, k="10")
