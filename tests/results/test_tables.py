"""Tests for embedlab.results.tables: the one formatter behind every ``--format`` (table, markdown, json, csv)."""

from __future__ import annotations

import csv
import io
import json

from embedlab.evaluation.records import Record
from embedlab.results.tables import RECORD_COLUMNS, format_costs, format_records, render


def records() -> list[Record]:
    """A few records of several tasks and two methods (also used by the summaries tests)."""
    return [
        Record("a", "sts", "sts12", "MSRpar", "spearman", 0.5, 750),
        Record("a", "sts", "sts12", "all", "spearman", 0.7, 3108),
        Record("a", "sts", "stsb", "test", "spearman", 0.8, 1379),
        Record("b", "sts", "stsb", "test", "spearman", 0.9, 1379),
        Record("a", "clustering", "tweet", "all", "accuracy", 0.6, 2472),
        Record("a", "triplets", "sts", "all", "error", 0.002, 455624),
        Record("b", "triplets", "sts", "all", "error", 0.001, 455624),
    ]


def test_text_and_markdown_tables_pivot_methods() -> None:
    table = format_records(records(), "table")
    lines = table.splitlines()
    assert lines[0].split() == ["task", "dataset", "subset", "metric", "a", "b", "n"]
    assert set(lines[1]) == {"-", " "} and "|" not in table
    # numbers are right-aligned: the n column ends every line at the same place
    assert len({len(line) for line in lines}) == 1
    markdown = format_records(records(), "markdown")
    assert "| sts | stsb | test | spearman | 0.8000 | 0.9000 | 1,379 |" in markdown
    assert "| sts | sts12 | all | spearman | 0.7000 |  | 3,108 |" in markdown
    assert markdown.splitlines()[1] == "|---|---|---|---|---:|---:|---:|"
    assert format_records([], "table") == "(no results)"


def test_json_and_csv_carry_every_record_with_its_unit() -> None:
    rows = [json.loads(line) for line in format_records(records(), "json").splitlines()]
    assert [tuple(row) for row in rows] == [RECORD_COLUMNS] * len(records())
    assert rows[0] == {"method": "a", "task": "sts", "dataset": "sts12", "subset": "MSRpar", "metric": "spearman",
                       "value": 0.5, "n": 750, "unit": "correlation", "ci_low": None, "ci_high": None,
                       "ci_resamples": None, "ci_resampled": None, "ci_note": None, "settings": {}, "cost": None}
    units = {(row["task"], row["metric"]): row["unit"] for row in rows}
    assert units[("clustering", "accuracy")] == "fraction" and units[("triplets", "error")] == "fraction"
    parsed = list(csv.reader(io.StringIO(format_records(records(), "csv"))))
    assert parsed[0] == list(RECORD_COLUMNS) and len(parsed) == len(records()) + 1
    assert parsed[-1] == ["b", "triplets", "sts", "all", "error", "0.001", "455624", "fraction", "", "", "", "", "", "", ""]


def test_intervals_print_beside_their_values_and_in_json() -> None:
    with_interval = Record("a", "sts", "stsb", "test", "spearman", 0.8203, 1379, ci_low=0.8071, ci_high=0.8322,
                           ci_resamples=1000, ci_resampled="pairs")
    undefined = Record("b", "sts", "stsb", "test", "spearman", 0.5, 1379, ci_note="constant score")
    table = format_records([with_interval, undefined], "table")
    assert "0.8203 [0.8071, 0.8322]" in table and "nan" not in table
    assert table.splitlines()[2].endswith("0.8203 [0.8071, 0.8322]  0.5000  1,379")  # right-aligned as numbers
    rows = [json.loads(line) for line in format_records([with_interval, undefined], "json").splitlines()]
    assert (rows[0]["ci_low"], rows[0]["ci_high"], rows[0]["ci_resamples"], rows[0]["ci_resampled"]) == (0.8071, 0.8322, 1000, "pairs")
    assert rows[1]["ci_low"] is None and rows[1]["ci_note"] == "constant score"


def test_render_quotes_csv_and_escapes_markdown() -> None:
    header, rows = ["name", "spec"], [["x", "minilm:layers=1+last,post=zscore"], ["y|z", None]]
    assert list(csv.reader(io.StringIO(render(header, rows, "csv")))) == [header, rows[0], ["y|z", ""]]
    assert "| y\\|z |  |" in render(header, rows, "markdown")
    assert [json.loads(line) for line in render(header, rows, "json").splitlines()][1] == {"name": "y|z", "spec": None}


def test_cells_follow_the_metric_declarations() -> None:
    rows = [Record("a", "pairs", "sts", "all", "wrong", 7216.0, 180492), Record("a", "pairs", "sts", "all", "error", 0.04, 180492),
            Record("a", "alignsim", "mrpc", "c1", "sim_pass@0.1", 0.75, 1194),
            Record("a", "alignsim", "qqp", "c2/n=1", "skipped", 3.0, 3)]
    table = format_records(rows, "markdown")
    assert "| pairs | sts | all | wrong | 7,216 |" in table and "| 4.00e-02 |" in table and "| 0.7500 |" in table
    assert "| skipped | 3 |" in table  # a count, not 3.0000


def test_settings_groups_get_a_column_and_their_own_rows() -> None:
    from dataclasses import replace

    plain = Record("a", "retrieval", "f", "all", "ndcg@10", 0.5, 3)
    grouped = [plain, replace(plain, value=0.4, settings={"search": "hnsw", "k": "1,10"}), replace(plain, method="b", value=0.3)]
    lines = format_records(grouped, "table").splitlines()
    assert lines[0].split() == ["task", "dataset", "subset", "metric", "settings", "a", "b", "n"]
    assert lines[2].split() == ["retrieval", "f", "all", "ndcg@10", "0.5000", "0.3000", "3"]  # the defaults: an empty cell
    assert lines[3].split() == ["retrieval", "f", "all", "ndcg@10", "k=1,10", "search=hnsw", "0.4000", "3"]
    assert "settings" not in format_records([plain], "table")  # omitted when every row has the defaults
    (row,) = list(csv.DictReader(io.StringIO(format_records(grouped[1:2], "csv"))))
    assert row["settings"] == "k=1,10 search=hnsw" and row["cost"] == ""


def test_costs_print_one_row_per_run() -> None:
    from dataclasses import replace

    cost = {"encode_seconds": 2.0, "cpu_seconds": 3.5, "texts": 100, "texts_per_second": 50.0, "peak_memory_mb": 12.25,
            "bytes_per_vector": 1536, "parameters": 22713216, "cpu_model": "Some CPU", "threads": 2, "partial": False, "note": None}
    runs = [Record("a", "sts", "stsb", "test", m, 0.5, 9, cost=cost) for m in ("spearman", "pearson")]
    runs.append(Record("b", "sts", "stsb", "test", "spearman", 0.5, 9))
    lines = format_costs(runs, "table").splitlines()
    assert len(lines) == 4  # header, rule, one row per method's run
    assert lines[2].split()[:11] == ["a", "sts", "stsb", "2.00", "3.50", "100", "50.0", "12.2", "1,536", "22,713,216", "2"]
    assert "no cost recorded" in lines[3]
    first = json.loads(format_costs(runs, "json").splitlines()[0])
    assert first == {"method": "a", "task": "sts", "dataset": "stsb", "settings": "", **cost}
    assert json.loads(format_costs([replace(runs[0], cost=None)], "json"))["encode_seconds"] is None
