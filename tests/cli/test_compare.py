"""Tests for embedlab.cli.compare: the command runs what is missing, reuses what is stored, and refuses
bad input with one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeMethod, beir_folder, isolated_eval_cache, scored_pairs_file  # noqa: F401 (autouse fixture)

from embedlab.cli import evaluate as cli_eval
from embedlab.cli.app import main
from embedlab.results.database import ResultsDB


@pytest.fixture()
def scored_pairs(tmp_path: Path) -> Path:
    return scored_pairs_file(tmp_path)


def test_compare_prints_differences_and_reuses_stored_runs(scored_pairs: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    created: list[FakeMethod] = []

    def fake_load(spec: str) -> FakeMethod:
        created.append(FakeMethod(spec=spec, dim=8 if spec == "fake-a" else 3))
        return created[-1]

    monkeypatch.setattr(cli_eval, "load_method", fake_load)
    db = tmp_path / "r.sqlite"
    argv = ["compare", "fake-a", "fake-b", "--tasks", f"sts:@{scored_pairs}", "--db", str(db), "--bootstrap", "200", "-q"]
    assert main(argv + ["--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["method"] for row in rows] == ["fake-a", "fake-b"] and rows[0]["diff"] is None
    assert rows[1]["diff_ci_low"] < rows[1]["diff"] < rows[1]["diff_ci_high"] and 0 < rows[1]["p"] <= rows[1]["p_holm"] <= 1
    assert rows[1]["diff"] == pytest.approx(rows[1]["value"] - rows[0]["value"])
    assert main(argv) == 0  # the second time from the database: nothing encoded
    assert created[2].encode_calls == [] and created[3].encode_calls == []
    assert "diff vs first [95% CI]" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["compare", "eval"])
@pytest.mark.parametrize("value, message", [("-3", "must not be negative"), ("x", "is not a whole number")])
def test_bad_bootstrap_counts_are_refused(command, value, message, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:  # argparse's usage error, before any work
        main([command, "a", "b", "--bootstrap", value])
    assert stopped.value.code == 2 and f"argument --bootstrap: '{value}' {message}" in capsys.readouterr().err


def test_no_resamples_is_refused(capsys) -> None:
    assert main(["compare", "a", "b", "--bootstrap", "0"]) == 2
    assert "compare needs bootstrap resamples" in capsys.readouterr().err


def test_one_method_is_refused(capsys) -> None:
    assert main(["compare", "a"]) == 2
    assert "at least two methods" in capsys.readouterr().err


def test_compare_takes_evals_task_options_and_names_the_settings_group(tmp_path: Path, monkeypatch, capsys) -> None:
    root = beir_folder(tmp_path / "beir", {f"d{i}": f"doc {i}" for i in range(24)}, {f"q{i}": f"query {i}" for i in range(12)},
                       [(f"q{i}", f"d{2 * i}", 1) for i in range(12)])
    monkeypatch.setattr(cli_eval, "load_method", lambda spec: FakeMethod(spec=spec, dim=4 if spec == "fake-a" else 6))
    db = tmp_path / "r.sqlite"
    base = ["compare", "fake-a", "fake-b", "--tasks", f"retrieval:@{root}", "--db", str(db), "--bootstrap", "50", "--metric"]
    assert main(["eval", "fake-a", "fake-b", "--tasks", f"retrieval:@{root}", "--db", str(db), "-q", "--bootstrap", "0"]) == 0
    capsys.readouterr()
    assert main([*base, "ndcg@2", "--k", "2", "--format", "json"]) == 0  # a cut-off only the --k 2 group has
    output = capsys.readouterr()
    rows = [json.loads(line) for line in output.out.splitlines()]
    assert [(row["method"], row["metric"], row["settings"]) for row in rows] == [("fake-a", "ndcg@2", "k=2"), ("fake-b", "ndcg@2", "k=2")]
    assert "settings: retrieval/beir@" in output.err and " k=2" in output.err
    assert main([*base, "ndcg@10"]) == 0  # no options: the defaults group, stored by eval beside the k=2 one
    output = capsys.readouterr()
    assert "settings: defaults" in output.err and "settings" not in output.out.splitlines()[0]
    groups = {json.dumps(r.settings) for r in ResultsDB(db).records()}
    assert groups == {"{}", '{"k": "2"}'}


@pytest.mark.parametrize("command", ["compare", "eval"])
def test_a_seed_beyond_what_the_database_stores_is_refused(command, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:  # argparse's usage error, before any work
        main([command, "a", "b", "--seed", str(2 ** 70)])
    assert stopped.value.code == 2 and "too large for a seed (at most 2**63 - 1" in capsys.readouterr().err


def test_a_huge_bootstrap_is_refused_before_any_work(capsys) -> None:
    assert main(["compare", "a", "b", "--bootstrap", "10000000"]) == 2  # "a" is never loaded
    assert "--bootstrap 10000000 is more than the 1,000,000 resamples" in capsys.readouterr().err
