"""embedlab.cli.alignsim: the ``alignsim`` subcommand end to end on ``st:minilm`` and small slices, through the
harness's evaluate(): records in the results database, reused on a rerun."""

from __future__ import annotations

import argparse
import json

import pytest
from alignsim_helpers import JaccardPairwise, load_minilm
from fakes import isolated_eval_cache  # noqa: F401 (autouse fixture)

from embedlab.cli.alignsim import add_cli, run_cli
from embedlab.results.tables import RECORD_COLUMNS
from embedlab.results.database import ResultsDB


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="embedlab")
    add_cli(parser.add_subparsers())
    return parser.parse_args(argv)


@pytest.fixture(scope="module")
def st_minilm():
    return load_minilm()


def test_json_output_records_database_and_report(tmp_path, capsys, st_minilm):
    database = ResultsDB(tmp_path / "results.sqlite")
    argv = ["alignsim", "st:minilm", "--criteria", "1,4", "--datasets", "mrpc,afin", "--pairs-per-label", "6",
            "--afin-pairs", "6", "--out", str(tmp_path), "--format", "json"]
    args = _parse(argv)
    assert args.handler is run_cli
    assert run_cli(args, load_method=lambda spec: st_minilm, open_db=lambda path: database) == 0
    output = capsys.readouterr()
    assert "alignsim: mrpc: items c1 12; sentences skipped: none" in output.err and "{" not in output.err  # in words, not a dict
    lines = [json.loads(line) for line in output.out.splitlines()]
    assert lines and all(tuple(line) == RECORD_COLUMNS for line in lines)
    # α needs QQP and PAWS random pairs too, but only the asked-for datasets are reported
    assert {line["dataset"] for line in lines} == {"mrpc", "afin", "all"}
    assert {line["subset"] for line in lines} == {"c1", "c4", "adjustment"}
    stored = database.provenance(method="st:minilm", task="alignsim")
    assert len(stored) == len(lines) and all(row["seed"] == 0 for row in stored)
    # the sample sizes are stored as the task's settings: other sizes are never served these results
    assert stored[0]["settings"]["sampling"]["pairs_per_label"] == 6
    report = (tmp_path / "report.md").read_text()
    assert "Criterion 1" in report and "Criterion 4" in report and "paper SBERT" in report
    for name in ("c1_mrpc_sim.png", "c1_mrpc_ned.png"):
        assert (tmp_path / "figures" / name).read_bytes()[:4] == b"\x89PNG"
    # the perturbation sets are saved for inspection, QQP/PAWS only with the random pairs α needs
    assert (tmp_path / "perturbations" / "mrpc.c1.jsonl").exists()
    assert not (tmp_path / "perturbations" / "qqp.c2.jsonl").exists()
    # a rerun reuses the stored records (and the stored margins for the histograms): same output
    assert run_cli(_parse(argv), load_method=lambda spec: st_minilm, open_db=lambda path: database) == 0
    again = capsys.readouterr()
    assert [json.loads(line) for line in again.out.splitlines()] == lines
    assert "reuse alignsim/mrpc for st:minilm" in again.err and "run " not in again.err
    assert (tmp_path / "figures" / "c1_mrpc_sim.png").exists()


def test_pairwise_method_table_output(tmp_path, capsys):
    args = _parse(
        ["alignsim", "test:jaccard", "--criteria", "5", "--datasets", "paws", "--triplets", "5", "--out", str(tmp_path),
         "--no-db"]
    )
    assert run_cli(args, load_method=lambda spec: JaccardPairwise()) == 0
    output = capsys.readouterr().out
    assert "Criterion 5" in output and "test:jaccard" in output
    assert "|" not in output  # --format table (the default) is a plain aligned table, not markdown
    header = next(line for line in output.splitlines() if line.startswith("method"))
    assert header.split()[:2] == ["method", "metric"]
    assert "NED is skipped" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "figures" / "c5_n1_paws_sim.png").exists()
    assert not (tmp_path / "figures" / "c5_n1_paws_ned.png").exists()


@pytest.mark.parametrize(
    "argv",
    [["alignsim", "x", "--criteria", "7"], ["alignsim", "x", "--datasets", "sts"], ["alignsim", "x", "--sim-epsilons", "a"]],
)
def test_bad_arguments_are_rejected(argv):
    with pytest.raises(SystemExit):
        _parse(argv)


def test_perturbation_option_reaches_the_saved_sets(tmp_path, capsys):
    argv = ["alignsim", "test:jaccard", "--criteria", "3", "--datasets", "mrpc", "--triplets", "5", "--out", str(tmp_path),
            "--no-db", "--perturbation", "authors"]
    assert run_cli(_parse(argv), load_method=lambda spec: JaccardPairwise()) == 0
    summary = json.loads((tmp_path / "perturbations" / "mrpc.summary.json").read_text(encoding="utf-8"))
    assert summary["config"]["perturbation"] == "authors"
    items = [json.loads(line) for line in (tmp_path / "perturbations" / "mrpc.c3.jsonl").read_text(encoding="utf-8").splitlines()]
    assert items and len(items) + summary["skipped"]["c3"] == 5
    for item in items:  # whitespace words, every occurrence of the chosen word replaced
        (change,) = item["changes"]
        words = item["original"].split()
        assert [i for i, word in enumerate(words) if word == change["original"]] == change["words"]
    with pytest.raises(SystemExit):
        _parse(argv[:-1] + ["both"])
    capsys.readouterr()
