"""Tests for embedlab.cli.choose: the command runs what is missing, reuses what is stored, prints one row per
method with the decision fields, and refuses what it cannot rank before loading any model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeMethod, isolated_eval_cache, scored_pairs_file  # noqa: F401 (autouse fixture)

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
    assert best["tie"] == "best" and best["tied_with_best"] and best["pareto"] and best["diff_vs_best"] is None
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
