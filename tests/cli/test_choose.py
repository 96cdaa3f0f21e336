"""Tests for embedlab.cli.choose: the command runs what is missing, reuses what is stored, prints one row per
method with the decision fields, and refuses what it cannot rank before loading any model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeMethod, beir_folder, isolated_eval_cache, scored_pairs_file  # noqa: F401 (autouse fixture)

from embedlab.cli import evaluate as cli_eval
from embedlab.cli.app import main


def test_choose_marks_the_best_and_its_ties_and_reuses_stored_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    pairs = scored_pairs_file(tmp_path)
    created: list[FakeMethod] = []

    def fake_load(spec: str) -> FakeMethod:
        created.append(FakeMethod(spec=spec, dim={"fake-a": 8, "fake-b": 3}.get(spec, 5)))
        return created[-1]

    monkeypatch.setattr(cli_eval, "load_method", fake_load)
    argv = ["choose", "fake-a", "fake-b", "fake-c", "--tasks", f"sts:@{pairs}", "--db", str(tmp_path / "r.sqlite"),
            "--bootstrap", "200", "-q"]
    assert main(argv + ["--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["method"] for row in rows] == ["fake-a", "fake-b", "fake-c"]
    best = max(rows, key=lambda row: row["value"])  # spearman: higher is better
    assert best["tie"] == "best" and best["tied_with_best"] and best["diff_vs_best"] is None
    assert_front_follows_the_figures(rows)
    assert "best" in best["picked_for"].split("; ")
    for row in rows:
        assert row["metric"] == "spearman" and row["ci_low"] < row["value"] < row["ci_high"]
        if row is not best:  # the paired difference from the best, with its interval
            assert row["diff_vs_best"] == pytest.approx(row["value"] - best["value"])
            assert row["diff_ci_low"] <= row["diff_vs_best"] <= row["diff_ci_high"]
            assert row["tied_with_best"] == (row["tie"] == "tied") == (row["p_holm"] >= 0.05)
    assert main(argv) == 0  # the second time from the database: nothing encoded
    assert all(method.encode_calls == [] for method in created[3:])
    table = capsys.readouterr().out
    assert "vs best [paired 95% CI]" in table and f"  best: {best['method']}" in table


@pytest.mark.parametrize("extra, message", [
    (["--bootstrap", "0"], "choose needs bootstrap resamples"),
    (["--bootstrap", "200", "--metric", "total"], "metric total of task pairs/sts is neither higher- nor lower-is-better"),
])
def test_what_cannot_be_ranked_is_refused_before_any_model_loads(extra, message, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli_eval, "load_method", lambda spec: pytest.fail(f"{spec} loaded before the refusal"))
    assert main(["choose", "a", "b", "--tasks", "pairs:sts", *extra]) == 2
    assert message in capsys.readouterr().err


def assert_front_follows_the_figures(rows: list[dict]) -> None:
    """The front recomputed from the printed figures: a row is off it only when another is at least as good on all
    four (quality, a tie with the best at the best's value; texts/s; bytes per vector; peak memory) and better on
    one; a figure missing on either side is not "at least as good"."""
    best = next(row["value"] for row in rows if row["tie"] == "best")

    def objectives(row: dict) -> tuple[float | None, ...]:
        costs = (row["texts_per_second"], row["bytes_per_vector"], row["peak_memory_mb"])
        signed = [None if value is None else sign * value for value, sign in zip(costs, (1, -1, -1))]
        return (best if row["tied_with_best"] else row["value"], *signed)

    for row in rows:
        mine = objectives(row)
        dominated = any(None not in objectives(other) + mine and all(a >= b for a, b in zip(objectives(other), mine))
                        and objectives(other) != mine for other in rows if other is not row)
        assert row["pareto"] == (not dominated), row["method"]


def _beir_folder(root: Path, sts_test_rows) -> Path:
    """A small BEIR folder from STS-B test: 60 second sentences are the corpus; the first sentence of each pair
    scored ≥ 3 is a query whose one relevant document is its pair's (22 queries)."""
    rows = sts_test_rows[:60]
    judged = [i for i, (score, _, _) in enumerate(rows) if score >= 3]
    return beir_folder(root, {f"d{i}": b for i, (_, _, b) in enumerate(rows)}, {f"q{i}": rows[i][1] for i in judged},
                       [(f"q{i}", f"d{i}", 1) for i in judged])


def test_minilm_its_binary_vectors_and_random_tokens_on_a_beir_folder(tmp_path: Path, sts_test_rows, capsys) -> None:
    folder = _beir_folder(tmp_path / "beir", sts_test_rows)
    specs = ["minilm", "minilm:precision=ubinary", "random:minilm"]
    assert main(["choose", *specs, "--tasks", f"retrieval:@{folder}", "--db", str(tmp_path / "r.sqlite"),
                 "--bootstrap", "200", "--format", "json", "-q"]) == 0
    rows = {row["method"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert list(rows) == specs and {row["metric"] for row in rows.values()} == {"ndcg@10"}
    # 384 float32 values, and 384 sign bits packed into 48 bytes
    assert [rows[spec]["bytes_per_vector"] for spec in specs] == [1536, 48, 1536]
    assert rows["minilm"]["tie"] == "best" and rows["minilm"]["value"] > rows["random:minilm"]["value"]
    for row in rows.values():
        assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["texts_per_second"] > 0 and row["peak_memory_mb"] >= 0
    assert_front_follows_the_figures(list(rows.values()))


def test_choose_compares_the_settings_group_its_task_options_name(tmp_path: Path, monkeypatch, capsys) -> None:
    root = beir_folder(tmp_path / "fake_beir", {f"d{i}": f"document {i}" for i in range(30)},
                       {f"q{i}": f"question {i}" for i in range(12)}, [(f"q{i}", f"d{i}", 1) for i in range(12)])
    monkeypatch.setattr(cli_eval, "load_method", lambda spec: FakeMethod(spec=spec, dim=4 if spec == "fake-a" else 6))
    argv = ["choose", "fake-a", "fake-b", "--tasks", f"retrieval:@{root}", "--db", str(tmp_path / "r.sqlite"),
            "--bootstrap", "100", "--format", "json"]
    assert main(argv) == 0
    defaults = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(argv + ["--k", "1,10"]) == 0  # another settings group: added beside the defaults, and the one compared
    captured = capsys.readouterr()
    cut = [json.loads(line) for line in captured.out.splitlines()]
    assert [row["settings"] for row in defaults] == ["defaults"] * 2 and [row["settings"] for row in cut] == ["k=1,10"] * 2
    assert "k=1,10" in captured.err  # the status line says which group
    # nDCG@10 does not depend on the other cut-offs: both groups hold the same values
    assert [row["value"] for row in cut] == [row["value"] for row in defaults]
    # other tools' name for the same metric (BEIR's NDCG@10, pytrec_eval's ndcg_cut_10) ranks on ndcg@10
    for alias in ("NDCG@10", "ndcg_cut_10"):
        assert main(argv + ["--metric", alias]) == 0
        aliased = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(row["metric"], row["value"]) for row in aliased] == [(row["metric"], row["value"]) for row in defaults]
