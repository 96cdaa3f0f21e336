"""Tests for embedlab.results.reproduce (values, plans, compare, render, recomputing, epsilon): paper values, committed records, comparison and the report."""

from __future__ import annotations

import html
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from embedlab.results.reproduce import recomputing
from embedlab.results.reproduce.epsilon import alignsim_epsilon_records
from embedlab.results.reproduce.plans import RECOMPUTE_PLANS, RecomputePlan, plan_for, plans
from embedlab.results.reproduce.recomputing import recompute, run_plans
from embedlab.results.reproduce.values import (
    PAPERS,
    PAPER_VALUES,
    PRINTED_SCALES,
    RECORDS,
    SCALED_UNITS,
    STATUSES,
    PaperValue,
    StoredRecord,
    convert,
    paper_values,
    read_records,
    unit_of,
    write_records,
)
from embedlab.results.reproduce.compare import compare, report_rows
from embedlab.results.reproduce.render import render_html, render_markdown

CANDIDATES = "neural:minilm,softmax=candidates"  # the Eq. 3 reference of the neural paper's plans
PAPER_FILES = {"neural": "neural-embeddings-for-text.md",
               "pooling": "extracting-sentence-embeddings-from-pretrained-transformers.md",
               "matching": "token-level-matching-sts.md", "alignsim": "align-sim-task-free-test-bed.md"}


def _papers_folder() -> Path | None:
    """The shared paper texts (beside the shared data), if this machine has them."""
    data = Path(os.environ.get("EMBEDLAB_DATA", Path(recomputing.__file__).resolve().parents[4] / "shared" / "data"))
    folder = data.parent / "papers"
    return folder if folder.is_dir() else None


def _value(value: str = "0.820", unit: str = "correlation", kind: str = "same", tolerance: str = "0.002") -> PaperValue:
    return PaperValue("neural", "Table 4", "all-MiniLM-L6-v2", "spearman", "sts", "m", value, unit, "", "st:minilm",
                      "correlations", "stsb", "similarity", "spearman", kind, tolerance, "why")


def _record(value: float, unit: str = "correlation") -> StoredRecord:
    return StoredRecord("st:minilm", "correlations", "stsb", "similarity", "spearman", value, 1379, unit, "v", "f", "recomputed: test")


def test_statuses_follow_the_printed_precision_and_the_tolerance():
    assert compare(_value(), _record(0.8203)).status == "exact"  # rounds to the printed 0.820
    assert compare(_value(), _record(0.8206)).status == "within tolerance"
    assert compare(_value(), _record(0.8230)).status == "outside tolerance"
    count = _value("945", "count", tolerance="2%")
    assert compare(count, _record(957, "count")).status == "within tolerance"  # 12 ≤ 2 % of 945 = 18.9
    assert compare(count, _record(964, "count")).status == "outside tolerance"
    assert compare(count, _record(945, "count")).status == "exact"
    missing = compare(_value(), None)
    assert missing.status == "not reproducible here" and missing.ours is None and "no stored record" in missing.reason
    # a cell a recompute plan produces is "not run here", with the plan's cost and the command that computes it
    plan = RecomputePlan(("st:minilm",), "correlations:stsb", expensive=True, cost="≈ 3 min")
    planned = compare(_value(), None, plan)
    assert planned.status == "not run here" and planned.ours is None and planned.reason.endswith("; why")
    assert ("≈ 3 min (`embedlab reproduce --recompute --paper neural --expensive --method 'st:minilm' "
            "--task correlations:stsb`)") in planned.reason
    assert compare(_value(kind="not-reproducible", tolerance=""), None, plan).status == "not reproducible here"
    assert compare(_value(kind="analogue", tolerance=""), _record(0.5)).status == "analogue on another model"
    assert compare(_value(kind="different-model", tolerance=""), _record(0.5)).status == "different model"


def test_units_convert_into_the_papers_unit():
    row = compare(_value("46.5", "percent", tolerance="2"), _record(0.4507))
    assert row.ours == pytest.approx(45.07) and row.difference == pytest.approx(-1.43) and row.status == "within tolerance"
    assert convert(82.49, "percent", "fraction") == pytest.approx(0.8249)
    assert convert(0.637, "correlation", "percent") == pytest.approx(63.7)  # the pooling paper prints ρ × 100
    for bad in (("count", "percent"), ("fraction", "correlation"), ("similarity", "percent")):
        with pytest.raises(ValueError, match=f"cannot convert {bad[0]} to {bad[1]}"):
            convert(3.0, *bad)


def test_one_unit_vocabulary_the_harness_declarations():
    """Every unit in the committed files is the declared unit of its metric (evaluation.base.UNITS), or
    "percent" for a share or correlation printed × 100, the one printed form (PRINTED_SCALES)."""
    from embedlab.evaluation.base import UNITS

    assert unit_of("classification", "accuracy") == "fraction"
    assert unit_of("triplets", "wrong") == "count" and unit_of("triplets", "same") == "similarity"
    assert unit_of("correlations", "kendall_c") == "correlation"
    assert set(PRINTED_SCALES).isdisjoint(UNITS) and SCALED_UNITS <= set(UNITS)
    for paper in PAPERS:
        labelled = [(value.unit, value.task, value.metric) for value in paper_values(paper)]
        labelled += [(record.unit, record.task, record.metric) for record in read_records(paper)]
        for unit, task, metric in labelled:
            declared = unit_of(task, metric)
            assert unit == declared or (unit == "percent" and declared in ("fraction", "correlation")), (paper, task, metric, unit)


def test_a_unit_other_than_the_declared_one_is_refused(tmp_path):
    source = RECORDS / "neural.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    line = next(number for number, text in enumerate(lines) if '"metric": "kendall_c"' in text)
    lines[line] = lines[line].replace('"unit": "correlation"', '"unit": "fraction"')
    (tmp_path / "neural.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"neural\.jsonl, line {line + 1}: bad unit 'fraction' \(correlations kendall_c is "
                                         r"declared 'correlation' or percent\)"):
        read_records("neural", tmp_path)
    values = (PAPER_VALUES / "neural.csv").read_text(encoding="utf-8").splitlines()
    row = next(number for number, text in enumerate(values) if ",count," in text)
    values[row] = values[row].replace(",count,", ",percent,", 1)
    (tmp_path / "neural.csv").write_text("\n".join(values) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"neural\.csv, line {row + 1}: bad unit 'percent' \(\w+ \w+ is declared 'count'\)"):
        paper_values("neural", tmp_path)


@pytest.mark.parametrize("paper", list(PAPERS))
def test_paper_values_parse_and_are_transcribed_from_the_paper(paper):
    values = paper_values(paper)
    assert values and all(value.paper == paper for value in values)
    folder = _papers_folder()
    if folder is None:
        pytest.skip("the shared paper texts are not on this machine")
    text = (folder / PAPER_FILES[paper]).read_text(encoding="utf-8")
    numbers = set(re.findall(r"-?\d+(?:\.\d+)?", text))
    missing = [f"{v.table} {v.row} {v.column} {v.dataset}: {v.value}" for v in values if v.value not in numbers]
    assert not missing, f"values not found in {PAPER_FILES[paper]}: {missing[:5]}"


def test_a_malformed_paper_value_names_the_file_and_line(tmp_path):
    source = PAPER_VALUES / "matching.csv"
    lines = source.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace(",analogue,", ",similar,")
    (tmp_path / "matching.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"matching\.csv, line 4: bad kind 'similar'"):
        paper_values("matching", tmp_path)


@pytest.mark.parametrize("paper", list(PAPERS))
def test_committed_records_parse_carry_their_fields_and_are_all_asked_for(paper):
    records = read_records(paper)
    assert records, f"no committed records for {paper}"
    wanted = {value.key for value in paper_values(paper)}
    for record in records:
        assert all([record.method, record.task, record.dataset, record.subset, record.metric, record.code_version,
                    record.provenance]), record
        assert record.n > 0
        assert record.recomputed or "not re-run" in record.provenance  # a number not recomputed says where it is from
        if record.recomputed:
            assert record.fingerprint, record
        assert record.key in wanted, f"record no paper value asks for: {record.key}"


def test_judgements_cite_our_interval_and_say_where_the_paper_falls(tmp_path):
    from embedlab.results.reproduce.render import interval_summary

    wide = replace(_record(0.8230), ci_low=0.8100, ci_high=0.8350, ci_resamples=1000, ci_resampled="pairs")
    outside = compare(_value(), wide)  # 0.820 is outside the 0.002 tolerance but inside [0.8100, 0.8350]
    assert outside.status == "outside tolerance" and outside.paper_in_interval is True
    assert outside.reason == "why; the paper's value lies inside our 95 % CI [0.8100, 0.8350]"
    narrow = compare(_value(), replace(wide, ci_low=0.8210, ci_high=0.8250))
    assert narrow.paper_in_interval is False and "lies outside our 95 % CI [0.8210, 0.8250]" in narrow.reason
    within = compare(_value(), replace(wide, value=0.8206, ci_low=0.8100, ci_high=0.8300))
    assert within.status == "within tolerance" and within.reason == "why; our 95 % CI [0.8100, 0.8300]"
    percent = compare(_value("82.0", "percent", tolerance="0.2"), wide)  # the interval in the paper's unit
    assert "lies inside our 95 % CI [81.00, 83.50]" in percent.reason
    bare = compare(_value(), _record(0.8230))
    assert bare.paper_in_interval is None and bare.reason == "why; no interval: recompute to get one"
    assert interval_summary([outside, narrow, bare, within]) == (
        "3 outside tolerance: the paper's value lies inside our 95 % CI in 1, outside it in 1; "
        "1 without an interval (recompute to get one)")
    path = write_records("neural", [wide, replace(_record(0.5), method="a")], tmp_path)  # intervals are written only where they exist
    assert [("ci_low" in line) for line in path.read_text().splitlines()] == [False, True]
    assert {r.value: r.ci_high for r in read_records("neural", tmp_path)} == {0.5: None, 0.8230: 0.8350}


def test_a_recompute_that_adds_an_interval_rewrites_the_line_and_one_without_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(recomputing, "needed_keys", lambda paper: {_record(0.8203).key})
    write_records("neural", [_record(0.8203)], tmp_path)
    same = (tmp_path / "neural.jsonl").read_text()
    recomputing.store_recomputed("neural", {_record(0.8203).key: replace(_record(0.8203), provenance="recomputed: again")}, tmp_path)
    assert (tmp_path / "neural.jsonl").read_text() == same  # the same number, no interval: the line stays
    bounded = replace(_record(0.8203), provenance="recomputed: again", ci_low=0.80, ci_high=0.84, ci_resamples=1000,
                      ci_resampled="pairs")
    (stored,) = recomputing.store_recomputed("neural", {bounded.key: bounded}, tmp_path)
    assert (stored.ci_low, stored.provenance) == (0.80, "recomputed: again")


def test_records_round_trip_sorted_and_a_bad_line_is_named(tmp_path):
    records = [_record(0.5), StoredRecord("a", "sts", "stsb", "test", "spearman", 0.1, 3, "correlation", "v", "f", "recomputed: x")]
    path = write_records("neural", records, tmp_path)
    assert read_records("neural", tmp_path) == sorted(records, key=lambda r: r.key)
    path.write_text(path.read_text() + '{"method": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"neural\.jsonl, line 3: missing"):
        read_records("neural", tmp_path)


def test_every_paper_value_appears_in_the_report_with_a_status():
    sections = {paper: report_rows(paper) for paper in PAPERS}
    records = {paper: read_records(paper) for paper in PAPERS}
    markdown = render_markdown(sections, records, command="test").splitlines()
    page = render_html(sections, records, command="test")
    assert "<script" not in page and "http" not in page  # one offline file
    for paper, rows in sections.items():
        assert len(rows) == len(paper_values(paper))
        for row in rows:
            value = row.paper_value
            cells = [value.table, value.row, value.column, value.dataset, value.value]
            prefix = "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " | "
            lines = [line for line in markdown if line.startswith(prefix)]
            assert lines, prefix
            assert all(line.split(" | ")[7] in STATUSES for line in lines), lines
            assert f"<td class='num'>{html.escape(value.value)}</td>" in page


def test_a_missing_record_points_at_the_plan_that_computes_it():
    values = {(value.table, value.row, value.column, value.dataset): value for value in paper_values("neural")}
    intersection = values[("Table 1", "all-mpnet-base-v2", "I", "mrpc")]
    plan = plan_for(intersection)
    assert plan is not None and plan.intersections_with and "triplets:mrpc" in plan.tasks.split(",")
    authors = next(value for value in paper_values("alignsim") if value.subset.endswith(",perturbation=authors"))
    assert plan_for(authors).subset_suffix == ",perturbation=authors"  # the variant's own plan, not the default's
    assert plan_for(replace(intersection, method="st:nothing")) is None


def test_the_llm_rows_are_smollm2_analogues_each_pointing_at_the_plan_of_its_criterion():
    """Every LLM row of ALIGN-SIM's Tables 2–6 has a SmolLM2 analogue row, and a missing record names the plan that
    produces its criterion (criterion 2 needs the synonym-replacement run, not the criterion-1 one beside it)."""
    rows = [value for value in paper_values("alignsim") if value.method == "smollm2"]
    llms = {"Bloom", "GPTNeo", "GPT3-Ada", "GPT3-ada", "LLaMA-2", "LLaMA-3", "Mistral", "OpenELM", "OLMo"}
    counts = {table: len({value.row for value in rows if value.table == table}) for table in ("Table 2", "Table 3", "Table 4", "Table 5", "Table 6")}
    assert counts == dict.fromkeys(counts, 8)
    assert {value.row.split(" (ours")[0] for value in rows} <= llms and {value.kind for value in rows} == {"analogue"}
    by_cell = {(value.table, value.row.split(" (ours")[0], value.column): value for value in rows}
    criterion_of = {("Table 6", "LLaMA-2", "QQP Pos"): 1, ("Table 3", "OLMo", "MRPC NED"): 1, ("Table 4", "Mistral", "WIKI n=3"): 2,
                    ("Table 5", "LLaMA-3", "adjusted sim"): 4}
    for cell, criterion in criterion_of.items():
        plan = plan_for(by_cell[cell])
        assert plan is not None and criterion in dict(plan.task_options)["criteria"], (cell, plan)
        assert plan.expensive and plan.cost
    assert by_cell[("Table 4", "Mistral", "WIKI n=3")].number == 0.394  # as printed
    senteval = plan_for(by_cell[("Table 2", "LLaMA-2", "MR")])
    assert senteval is not None and "classification:mr" in senteval.tasks.split(",")
    for row in (row for row in report_rows("alignsim") if row.paper_value.method == "smollm2"):
        assert row.status in ("analogue on another model", "not run here"), row


def test_recompute_rewrites_only_what_it_recomputes(tmp_path, monkeypatch):
    """A recompute of STS-B pairs for st:minilm reproduces the paper's 7,216 / 180,492 (seed paper Table 3),
    keeps every other record line as it was, and a second recompute leaves the file byte-identical."""
    shutil.copy(RECORDS / "neural.jsonl", tmp_path / "neural.jsonl")
    before = (tmp_path / "neural.jsonl").read_text(encoding="utf-8").splitlines()
    monkeypatch.setitem(RECOMPUTE_PLANS, "neural", (RecomputePlan(("st:minilm",), "pairs:sts"),
                                                              RecomputePlan(("neural:minilm",), "pairs:sts", expensive=True)))
    messages: list[str] = []
    records = recompute("neural", records_folder=tmp_path, log=messages.append)
    assert any("skipped" in message and "neural:minilm" in message for message in messages)
    by_key = {record.key: record for record in records}
    assert by_key[("st:minilm", "pairs", "sts", "all", "wrong")].value == 7216
    assert by_key[("st:minilm", "pairs", "sts", "all", "total")].value == 180492
    after = (tmp_path / "neural.jsonl").read_text(encoding="utf-8").splitlines()
    untouched = [line for line in before if '"pairs", "dataset": "sts"' not in line or '"st:minilm"' not in line]
    assert set(untouched) <= set(after)
    recompute("neural", records_folder=tmp_path, log=messages.append)
    assert (tmp_path / "neural.jsonl").read_text(encoding="utf-8").splitlines() == after


def test_plans_filter_by_method_and_cost():
    chosen, skipped = plans("neural")
    assert chosen and all(not plan.expensive for plan in chosen) and all(plan.expensive for plan in skipped)
    appendix_g = "neural:minilm,params=block,epochs=5,variant=cls"
    chosen, skipped = plans("neural", methods=[appendix_g])
    assert chosen == [] and len(skipped) == 1 and appendix_g in skipped[0].specs and len(skipped[0].specs) == 8  # one run
    chosen, _ = plans("neural", expensive=True, methods=[appendix_g])
    assert [plan.specs for plan in chosen] == [(appendix_g,)]


def test_alignsim_epsilon_search_names_its_grid_and_averages_the_stored_margins():
    """The fitted Table 3 records: one grid per metric for the three datasets, named in the metric, with the
    average pass rate over that grid recomputed here from the same margins."""
    rng = np.random.default_rng(0)
    margins = {(dataset, "c1", metric): rng.normal(loc, 0.2, size=size).astype(np.float32)
               for dataset, loc, size in (("qqp", 0.8, 300), ("paws", 0.9, 200), ("mrpc", 0.7, 100))
               for metric in ("sim", "ned")}

    class Task:
        name = "alignsim"

        def __init__(self, dataset):
            self.dataset = dataset

        def margins(self, method):
            return {key: array for key, array in margins.items() if key[0] == self.dataset}

    method = SimpleNamespace(spec="st:minilm")
    records = alignsim_epsilon_records([method], [Task(d) for d in ("qqp", "paws", "mrpc")],
                                       {"st:minilm": "fp"}, version="v", provenance="test")
    assert len(records) == 6 and {r.dataset for r in records} == {"qqp", "paws", "mrpc"}
    for record in records:
        kind = record.metric.split("_")[0]
        match = re.fullmatch(rf"{kind}_pass_avg@0-(\d\.\d\d)/0\.05", record.metric)
        assert match and record.subset == "c1" and record.fingerprint == "fp" and record.unit == "fraction"
        array = margins[(record.dataset, "c1", kind)]
        grid = np.arange(0, float(match.group(1)) + 1e-9, 0.05)
        assert record.n == len(array)
        assert record.value == pytest.approx(np.mean([(array > eps).mean() for eps in grid]), abs=1e-6)
    assert len({r.metric for r in records}) <= 2  # one grid per metric for all three datasets


def test_a_plan_variant_stores_its_records_under_their_own_subsets(monkeypatch):
    """``subset_suffix`` keeps a variant's records (e.g. ALIGN-SIM's perturbation=authors) apart from the
    default's; ``task_options`` reach the tasks that declare them."""
    plan = RecomputePlan(("st:minilm",), "pairs:sts", subset_suffix=",variant=x", task_options=(("seed", 0),))
    key = ("st:minilm", "pairs", "sts", "all,variant=x", "wrong")
    monkeypatch.setattr(recomputing, "needed_keys", lambda paper: {key})
    fresh = run_plans("neural", [plan], provenance="recomputed: test", log=lambda message: None)
    assert list(fresh) == [key] and fresh[key].value == 7216  # the paper's count, under the variant's subset


def test_table_4_summeval_shows_both_protocols_the_cut_one_by_the_truncate_option():
    """The paper's MiniLM SummEval row is the sentence-transformers protocol (articles cut at 256 tokens):
    its cells are compared with `minilm:truncate=256`, and the whole-article pooling beside them as another
    protocol, each record stating its protocol; the cut reproduces consistency and fluency (0.087 / 0.064)."""
    rows = [row for row in report_rows("neural") if row.paper_value.table == "Table 4" and row.paper_value.task == "correlations"
            and row.paper_value.our_dataset == "summeval" and row.paper_value.row == "all-MiniLM-L6-v2"]
    cut = [row for row in rows if row.paper_value.kind == "same"]
    whole = [row for row in rows if row.paper_value.kind == "protocol"]
    assert len(cut) == len(whole) == 12
    assert {row.paper_value.method for row in cut} == {"minilm:truncate=256"} and {row.paper_value.method for row in whole} == {"minilm"}
    assert all(row.record is not None and row.record.recomputed for row in rows)
    assert all("truncate=256" in row.record.protocol for row in cut) and all("whole" in row.record.protocol for row in whole)
    by_cell = {(row.paper_value.dataset, row.paper_value.metric, row.paper_value.kind): row for row in rows}
    assert by_cell[("summeval fluency", "kendall_c", "same")].status == "exact"
    assert by_cell[("summeval consistency", "kendall_c", "same")].status == "within tolerance"
    assert by_cell[("summeval consistency", "kendall_c", "protocol")].ours < 0.075  # whole articles: 0.069, not the paper's
    chosen, _ = plans("neural", methods=["minilm:truncate=256"])
    assert [(plan.specs, plan.tasks) for plan in chosen] == [(("minilm:truncate=256",), "correlations:summeval")]


def test_plans_filter_by_task_too():
    """``--task`` narrows a recompute to one dataset of the plans that run it (e.g. the Eq. 3 intersection on
    summ-r, without the other SummEval sets' micro-tuning)."""
    chosen, skipped = plans("neural", methods=["st:minilm"], tasks=["triplets:summ-r"])
    assert [(plan.specs, plan.tasks, plan.intersections_with) for plan in chosen] == [(("st:minilm",), "triplets:summ-r", None)]
    assert [plan.intersections_with for plan in skipped] == [CANDIDATES]
    chosen, skipped = plans("neural", expensive=True, methods=["st:minilm"], tasks=["triplets:summ-r", "triplets:text-summ-r"])
    assert skipped == [] and [plan.tasks for plan in chosen] == ["triplets:summ-r,triplets:text-summ-r"] * 2
    assert chosen[1].intersections_with == CANDIDATES
    assert plans("neural", tasks=["clustering:tweet"]) == ([], [])


def test_eq3_intersections_agree_with_the_broken_triplet_counts():
    """Each committed Eq. 3 record of st:minilm (``vs`` the candidate-set neural embedding) has I in [0, 1] and
    n = |T_st ∩ T_neural|, so n / I = min(|T_st|, |T_neural|) can be no more than |T_st|, st:minilm's own
    committed count of broken triplets on the same set; the summ datasets have theirs beside sts."""
    records = {record.key: record for record in read_records("neural")}
    intersections = [record for record in records.values()
                     if record.method == "st:minilm" and record.metric == "intersection"]
    assert {record.dataset for record in intersections} == {"sts", "summ-r", "text-summ-r", "summ-g", "text-summ-g"}
    for record in intersections:
        assert record.subset == f"vs {CANDIDATES}" and record.unit == "fraction" and record.recomputed
        wrong = records[("st:minilm", "triplets", record.dataset, "all", "wrong")].value
        assert 0 < record.value <= 1 and record.n <= wrong
        assert record.n / record.value <= wrong + 0.5
