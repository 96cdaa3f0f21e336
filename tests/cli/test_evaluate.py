"""Tests for embedlab.cli.evaluate and the evaluate() runner: JSON lines, database reuse, results, report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod, isolated_eval_cache  # noqa: F401 (autouse fixture)

from embedlab.cli import evaluate as cli_eval
from embedlab.cli.app import main
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.results.database import ResultsDB
from embedlab.results.tables import RECORD_COLUMNS


def _run(argv: list[str]) -> int:
    """The command's exit status, through the command line's error handling."""
    return main(argv)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    pairs = tmp_path / "labelled.tsv"
    pairs.write_text("a b\ta b\t1\nc d\te f\t0\ng h\tg h x\t1\ni\tj\t0\n")
    groups = tmp_path / "groups.tsv"
    groups.write_text("a\tb\tc\nd\te\nf\tg\th\n")
    return {"pairs": pairs, "groups": groups}


def test_eval_json_lines_and_reuse(files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    created: list[FakeMethod] = []

    def fake_load(spec: str) -> FakeMethod:
        created.append(FakeMethod(spec=spec, pairwise=spec.startswith("pair")))
        return created[-1]

    monkeypatch.setattr(cli_eval, "load_method", fake_load)
    db = tmp_path / "results.sqlite"
    tasks = f"pairs:@{files['pairs']},triplets:@{files['groups']},sts:@{files['pairs']}"
    argv = ["eval", "fake-a", "pair-b", "--tasks", tasks, "--groups-per-line", "--format", "json", "--db", str(db)]
    assert _run(argv) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert rows and all(list(row) == list(RECORD_COLUMNS) for row in rows)
    assert {row["unit"] for row in rows if row["metric"] == "total"} == {"count"}
    assert {(r["method"], r["task"]) for r in rows} == {
        ("fake-a", "pairs"), ("fake-a", "triplets"), ("fake-a", "sts"), ("pair-b", "pairs"), ("pair-b", "sts")}
    assert re.search(r"skip triplets/groups@[0-9a-f]{8} for pair-b", captured.err)  # pairwise method: reported, not failed
    totals = {r["method"]: r["value"] for r in rows if r["task"] == "pairs" and r["metric"] == "total"}
    assert totals == {"fake-a": 4, "pair-b": 4}
    assert len(created[0].encode_calls) == 3  # one encode call per dataset

    # rerun: everything comes from the database, nothing is encoded
    assert _run(argv) == 0
    again = capsys.readouterr()
    assert [json.loads(line) for line in again.out.splitlines()] == rows
    assert created[2].encode_calls == [] and created[3].similarity_calls == 0
    assert re.search(r"reuse pairs/labelled@[0-9a-f]{8} for fake-a", again.err)
    # --force recomputes the tasks (the encodings themselves come from the on-disk cache)
    assert _run(argv + ["--force"]) == 0
    forced = capsys.readouterr()
    assert re.search(r"run pairs/labelled@[0-9a-f]{8} for fake-a", forced.err) and "reuse" not in forced.err
    assert created[4].encode_calls == []


def test_results_and_report(files, tmp_path: Path, capsys) -> None:
    db = ResultsDB(tmp_path / "r.sqlite")
    tasks = parse_tasks(f"pairs:@{files['pairs']},sts:@{files['pairs']}")
    evaluate([FakeMethod(spec="m1"), FakeMethod(spec="m2", dim=3)], tasks, db=db, log=lambda m: None)
    assert _run(["results", "--db", str(db.path), "--task", "pairs", "--format", "markdown"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0] == "| task | dataset | subset | metric | m1 | m2 | n |"
    assert re.search(r"\| pairs \| labelled@[0-9a-f]{8} \| all \| total \| 4 \| 4 \| 4 \|", table)
    assert _run(["results", "--db", str(db.path), "--metric", "spearman", "--method", "m2", "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["method"], r["task"], r["metric"]) for r in rows] == [("m2", "sts", "spearman")]
    out = tmp_path / "report.html"
    assert _run(["report", "--db", str(db.path), "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 2 and "<table>" in page and "http" not in page.lower()
    # provenance: the command and the database's file name, never its folder
    assert f"embedlab report --db {db.path} --out {out}" in page and str(tmp_path) not in page.replace(str(db.path), "").replace(str(out), "")
    empty = ResultsDB(tmp_path / "empty.sqlite").path
    assert _run(["report", "--db", str(empty), "--out", str(out)]) == 1


def test_bad_task_selection_is_a_clear_error(capsys) -> None:
    assert _run(["eval", "x", "--tasks", "nonsense", "--no-db"]) == 2
    assert "unknown task 'nonsense'" in capsys.readouterr().err
    assert _run(["eval", "x", "--tasks", "pairs:@/no/such/file.tsv", "--no-db"]) == 2
    assert "data file not found" in capsys.readouterr().err


def test_triplet_intersection_records(files, tmp_path: Path) -> None:
    from embedlab.data.user_files import load_grouped_texts
    from embedlab.evaluation.triplets import broken_intersection, intersection_ratio

    db = ResultsDB(tmp_path / "i.sqlite")
    tasks = parse_tasks(f"triplets:@{files['groups']}", layout="line")
    first, second = FakeMethod(spec="ref", dim=2), FakeMethod(spec="other", dim=3)
    run = evaluate([first, second], tasks, db=db, intersections=True, log=lambda m: None)
    (record,) = [r for r in run.records if r.metric == "intersection"]
    assert record.method == "other" and record.subset == "vs ref"
    data = load_grouped_texts(files["groups"], layout="line")
    vectors = lambda m: np.stack([m.vector(t) for t in data.texts])  # noqa: E731
    common, broken_1, broken_2 = broken_intersection(vectors(second), vectors(first), data)
    assert record.value == pytest.approx(intersection_ratio(common, broken_1, broken_2), nan_ok=True)
    again = evaluate([first, second], tasks, db=db, intersections=True, log=lambda m: None)
    assert [r for r in again.records if r.metric == "intersection"] == [record]


def test_results_of_other_settings_are_added_beside_not_replacing(tmp_path: Path) -> None:
    labelled = tmp_path / "labelled.tsv"
    labelled.write_text("".join(f"{k % 2}\ttext {k}\n" for k in range(12)))
    db = ResultsDB(tmp_path / "s.sqlite")
    method = FakeMethod(spec="settings")
    messages: list[str] = []
    for seed in (0, 1, 1, 0):
        evaluate([method], parse_tasks(f"clustering:@{labelled}", seed=seed), db=db, seed=seed, log=messages.append)
    # seed 0's rows survive seed 1's run: the last run reuses them
    assert [m.split()[0] for m in messages if not m.startswith("done ")] == ["run", "run", "reuse", "reuse"]
    assert sum(m.startswith("done clustering/labelled@") and " s (1/1 tasks)" in m for m in messages) == 2  # per-task time
    dataset = parse_tasks(f"clustering:@{labelled}")[0].dataset  # the seed is no part of a user file's name
    assert db.settings_groups("settings", "clustering", dataset) == [{}, {"seed": 1}]
    assert {row["seed"] for row in db.provenance(method="settings")} == {0, 1}
    assert {r.settings.get("seed", 0) for r in db.records(method="settings")} == {0, 1}


@pytest.fixture()
def beir_folder(tmp_path: Path) -> Path:
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"doc {i}"}) + "\n" for i in range(6)))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(3)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{2 * i}\t1\n" for i in range(3)))
    return root


def test_eval_retrieval_flags(beir_folder, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli_eval, "load_method", lambda spec: FakeMethod(spec=spec, pairwise=spec.startswith("pair")))
    run_file = tmp_path / "run.trec"
    assert _run(["eval", "fake", "--tasks", f"retrieval:@{beir_folder}", "--no-db", "--format", "json", "--k", "1,5",
                 "--run-out", str(run_file), "--rerank", "pair", "--rerank-depth", "4"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(row["subset"], row["metric"]) for row in rows} >= {("all", "ndcg@5"), ("rerank:pair@4", "mrr@1")}
    assert all(row["unit"] == "fraction" for row in rows if "@" in row["metric"])
    assert len(run_file.read_text().splitlines()) == 3 * 5  # the top max(k) of each query
    refusals = {("--run-out", "x", "--tasks", "sts:stsb"): "--run-out is an option of retrieval tasks",
                ("--rerank", "vectors", "--tasks", f"retrieval:@{beir_folder}"): "--rerank needs a pairwise method",
                ("--k", "0,5", "--tasks", f"retrieval:@{beir_folder}"): "--k must be comma-separated positive integers"}
    for argv, message in refusals.items():
        assert _run(["eval", "fake", "--no-db", *argv]) == 2
        assert message in capsys.readouterr().err
    assert _run(["eval", "fake", "other", "--no-db", "--tasks", f"retrieval:@{beir_folder}", "--run-out", "x"]) == 2
    assert "give one method and one retrieval task" in capsys.readouterr().err


def test_reruns_with_other_retrieval_settings_keep_every_row(beir_folder, tmp_path, monkeypatch, capsys) -> None:
    """The issue's loss: a second run with another --k, --search, --rescore or --rerank erased the first's rows."""
    monkeypatch.setattr(cli_eval, "load_method", lambda spec: FakeMethod(spec=spec, pairwise=spec.startswith("pair")))
    db = tmp_path / "kept.sqlite"
    runs = [[], ["--k", "1,5"], ["--search", "hnsw"], ["--rescore", "2"], ["--rerank", "pair", "--rerank-depth", "4"]]
    counts = []
    for options in runs:
        assert _run(["eval", "fake", "--tasks", f"retrieval:@{beir_folder}", "--db", str(db), "-q", "--bootstrap", "0", *options]) == 0
        counts.append(len(ResultsDB(db).records()))
    capsys.readouterr()
    assert counts[0] > 0 and all(later > earlier for earlier, later in zip(counts, counts[1:]))  # every run only adds
    stored = ResultsDB(db).records()
    assert {json.dumps(r.settings, sort_keys=True) for r in stored} == {
        "{}", '{"k": "1,5"}', '{"search": "hnsw"}', '{"rescore": 2}'}  # the rerank adds rows of its own subset
    assert any(r.subset == "rerank:pair@4" and not r.settings for r in stored)
    created = {(row["subset"], row["metric"], json.dumps(row["settings"])): row["created"] for row in ResultsDB(db).provenance()}
    assert _run(["eval", "fake", "--tasks", f"retrieval:@{beir_folder}", "--db", str(db), "-q", "--bootstrap", "0", "--k", "1,5",
                 "--force"]) == 0  # recomputes the k=1,5 group's rows only
    recreated = {(row["subset"], row["metric"], json.dumps(row["settings"])): row["created"] for row in ResultsDB(db).provenance()}
    assert recreated.keys() == created.keys()
    assert {key[2] for key in created if recreated[key] != created[key]} == {'{"k": "1,5"}'}
    capsys.readouterr()
    assert _run(["results", "--db", str(db), "--metric", "ndcg@5", "--subset", "all"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:5] == ["task", "dataset", "subset", "metric", "settings"]
    # one row per settings group; the defaults' settings cell is empty, so its 5th word is the value
    assert sorted(line.split()[4] for line in table[2:])[1:] == ["k=1,5", "rescore=2", "search=hnsw"]
    assert len(table) == 2 + 4
    assert _run(["results", "--db", str(db), "--format", "json", "--settings", "k=1,5"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {row["metric"] for row in rows if "@" in row["metric"]} == {
        f"{m}@{k}" for m in ("ndcg", "map", "mrr", "recall", "precision") for k in (1, 5)}
    assert all(row["settings"] == {"k": "1,5"} for row in rows)
    hnsw = len(ResultsDB(db).records(settings={"search": "hnsw"}))
    assert _run(["results", "--db", str(db), "--delete", "--settings", "search=hnsw"]) == 0
    listed, removed = capsys.readouterr()
    assert f"deleted {hnsw} rows" in removed and "ndcg@10" in listed  # what it deletes is listed first
    assert len(ResultsDB(db).records()) == counts[-1] - hnsw and hnsw > 25 and not ResultsDB(db).records(settings={"search": "hnsw"})
    assert _run(["results", "--db", str(db), "--delete"]) == 2
    assert "needs a filter" in capsys.readouterr().err
