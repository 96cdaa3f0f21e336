"""Bad input gets a clear error and nothing wrong is stored.

Each case writes a real file with a real fault (a JSON null where a text belongs, a header that is not
one, a lone surrogate, a file too small for its folds, two files of the same name) and asserts the exact
behaviour: the error names the file and line, or the value computed is the file's own.
"""

from __future__ import annotations

import re
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod, isolated_eval_cache  # noqa: F401 (autouse fixture)

from embedlab.data import DataFormatError, unicode_problem, user_files
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.results.database import ResultsDB


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- JSON lines: texts must be strings (item 5) --------------------------------------------------------

@pytest.mark.parametrize("value, found", [("null", "null"), ("5", "a number"), ("true", "a boolean"),
                                          ('["a"]', "a list"), ('{"a": 1}', "an object")])
def test_a_scored_pair_text_that_is_not_a_string_names_file_and_line(tmp_path, value, found) -> None:
    file = _write(tmp_path, "pairs.jsonl", '{"text1": "a", "text2": "b", "score": 1}\n'
                                           f'{{"text1": {value}, "text2": "c", "score": 2}}\n')
    with pytest.raises(DataFormatError, match=rf"pairs.jsonl, line 2: text1 must be a string, found {found}"):
        user_files.load_scored_pairs(file)


@pytest.mark.parametrize("value, found", [("null", "null"), ("true", "a boolean"), ('"high"', None)])
def test_a_json_score_that_is_not_a_number_names_file_and_line(tmp_path, value, found) -> None:
    file = _write(tmp_path, "pairs.jsonl", f'{{"text1": "a", "text2": "b", "score": {value}}}\n')
    expected = f"score must be a number, found {found}" if found else "score 'high' is not a number"
    with pytest.raises(DataFormatError, match=rf"pairs.jsonl, line 1: {expected}"):
        user_files.load_scored_pairs(file)


def test_a_json_nan_score_is_refused(tmp_path) -> None:
    file = _write(tmp_path, "pairs.jsonl", '{"text1": "a", "text2": "b", "score": NaN}\n')
    with pytest.raises(DataFormatError, match=r"pairs.jsonl, line 1: score 'nan' is not finite"):
        user_files.load_scored_pairs(file)


def test_labelled_and_grouped_json_texts_must_be_strings(tmp_path) -> None:
    labelled = _write(tmp_path, "labels.jsonl", '{"text": "a", "label": 1}\n{"text": 7, "label": 0}\n')
    with pytest.raises(DataFormatError, match=r"labels.jsonl, line 2: text must be a string, found a number"):
        user_files.load_labelled_texts(labelled)
    no_label = _write(tmp_path, "nolabel.jsonl", '{"text": "a", "label": null}\n')
    with pytest.raises(DataFormatError, match=r"nolabel.jsonl, line 1: label must be a string or a whole number, found null"):
        user_files.load_labelled_texts(no_label)
    column = _write(tmp_path, "groups.jsonl", '{"group": 1, "text": "a"}\n{"group": 2, "text": null}\n')
    with pytest.raises(DataFormatError, match=r"groups.jsonl, line 2: text must be a string, found null"):
        user_files.load_grouped_texts(column)
    lines = _write(tmp_path, "lines.jsonl", '["a", "b"]\n["c", 4]\n')
    with pytest.raises(DataFormatError, match=r"lines.jsonl, line 2: text 2 must be a string, found a number"):
        user_files.load_grouped_texts(lines, layout="line")


def test_whole_number_labels_in_json_are_kept_as_labels(tmp_path) -> None:
    file = _write(tmp_path, "labels.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n{"text": "c", "label": 1}\n')
    data = user_files.load_labelled_texts(file)
    assert data.label_names == ["0", "1"] and data.labels.tolist() == [1, 0, 1]


# --- one header rule for every TSV/CSV format (item 5) -------------------------------------------------

def test_a_first_row_with_a_non_numeric_score_is_an_error_not_a_header(tmp_path) -> None:
    file = _write(tmp_path, "pairs.tsv", "first text\tsecond text\tsimilar\na\tb\t1\n")
    with pytest.raises(DataFormatError, match=r"pairs.tsv, line 1: score 'similar' is not a number"):
        user_files.load_scored_pairs(file)


@pytest.mark.parametrize("header", ["text1\ttext2\tscore", "TEXT1\tText2\tScore", " sentence1 \tsentence2\tsimilarity"])
def test_a_header_of_the_column_names_is_recognised_case_insensitively(tmp_path, header) -> None:
    file = _write(tmp_path, "pairs.tsv", f"{header}\na\tb\t1.5\nc\td\t2\n")
    data = user_files.load_scored_pairs(file)
    assert data.first == ["a", "c"] and data.second == ["b", "d"] and data.scores.tolist() == [1.5, 2.0]


def test_a_header_may_list_the_columns_in_another_order(tmp_path) -> None:
    file = _write(tmp_path, "pairs.csv", "score,text2,text1\n1.5,b,a\n2,d,c\n")
    data = user_files.load_scored_pairs(file)
    assert data.first == ["a", "c"] and data.second == ["b", "d"] and data.scores.tolist() == [1.5, 2.0]


def test_a_header_row_later_in_the_file_is_a_bad_line(tmp_path) -> None:
    file = _write(tmp_path, "pairs.tsv", "a\tb\t1\ntext1\ttext2\tscore\n")
    with pytest.raises(DataFormatError, match=r"pairs.tsv, line 2: score 'score' is not a number"):
        user_files.load_scored_pairs(file)


def test_a_header_line_in_a_grouped_two_column_file_is_not_a_group(tmp_path) -> None:
    file = _write(tmp_path, "groups.tsv", "Group\tText\ng1\tx\ng2\ty\ng1\tz\n")
    data = user_files.load_grouped_texts(file)
    assert data.texts == ["x", "y", "z"] and data.groups.tolist() == [0, 1, 0] and data.triplet_count() == 2


def test_a_grouped_first_row_that_is_not_the_header_stays_data(tmp_path) -> None:
    file = _write(tmp_path, "groups.tsv", "group\tfirst text\ng2\ty\ngroup\tz\n")
    data = user_files.load_grouped_texts(file)
    assert data.texts == ["first text", "y", "z"] and data.groups.tolist() == [0, 1, 0]


def test_a_labelled_header_sets_the_column_order(tmp_path) -> None:
    file = _write(tmp_path, "labels.tsv", "TEXT\tLABEL\nhello\tgreet\nbye\tleave\n")
    data = user_files.load_labelled_texts(file)
    assert data.texts == ["hello", "bye"] and data.label_names == ["greet", "leave"]


def test_a_labelled_first_row_of_data_is_kept(tmp_path) -> None:
    file = _write(tmp_path, "labels.tsv", "positive\tgreat film\nnegative\tdull\n")
    data = user_files.load_labelled_texts(file)
    assert data.texts == ["great film", "dull"] and data.label_names == ["negative", "positive"]


def test_grouped_files_with_one_group_per_line_have_no_header(tmp_path) -> None:
    file = _write(tmp_path, "lines.tsv", "text\ttext\na\tb\n")
    assert user_files.load_grouped_texts(file, layout="line").texts == ["text", "text", "a", "b"]


def test_a_row_with_the_wrong_number_of_fields_names_the_line(tmp_path) -> None:
    file = _write(tmp_path, "pairs.tsv", "a\tb\t1\nc\td\n")
    with pytest.raises(DataFormatError, match=r"pairs.tsv, line 2: expected 3 fields \(text1, text2, score\), found 2"):
        user_files.load_scored_pairs(file)


# --- lone surrogates and paths that are not files (items 10, 11) ---------------------------------------

def test_a_lone_surrogate_in_a_json_text_names_line_and_character(tmp_path) -> None:
    file = _write(tmp_path, "pairs.jsonl", '{"text1": "ok", "text2": "b", "score": 1}\n'
                                           '{"text1": "ok", "text2": "bad \\ud800", "score": 1}\n')
    with pytest.raises(DataFormatError, match=r"pairs.jsonl, line 2: text2 has a lone surrogate '\\ud800' at character 4"):
        user_files.load_scored_pairs(file)


def test_unicode_problem_accepts_any_valid_text() -> None:
    assert unicode_problem("naïve café 🤖 日本") is None
    assert unicode_problem("x\udcff") == "lone surrogate '\\udcff' at character 1 (not valid Unicode)"


def test_a_folder_given_as_a_user_file_says_it_is_a_folder(tmp_path) -> None:
    with pytest.raises(IsADirectoryError):
        user_files.load_scored_pairs(tmp_path)
    with pytest.raises(IsADirectoryError):
        parse_tasks(f"sts:@{tmp_path}")


# --- user files are keyed by content (item 3) ----------------------------------------------------------

def _groups_file(folder: Path, groups: int) -> Path:
    return _write(folder, "groups.tsv", "".join(f"g{k % groups}\ttext {k} of the file\n" for k in range(4 * groups)))


def test_user_file_names_carry_a_hash_of_the_content(tmp_path) -> None:
    first, second = _groups_file(tmp_path / "a", 2), _groups_file(tmp_path / "b", 3)
    copy = _write(tmp_path / "c", "groups.tsv", first.read_text())
    name_1, name_2, name_copy = (parse_tasks(f"triplets:@{f}")[0].dataset for f in (first, second, copy))
    assert re.fullmatch(r"groups@[0-9a-f]{8}", name_1)
    assert name_1 != name_2  # same name, other content
    assert name_1 == name_copy  # same content elsewhere: the same data, the same results


def test_the_layout_a_file_is_read_with_is_part_of_its_name(tmp_path) -> None:
    file = _groups_file(tmp_path, 2)
    assert parse_tasks(f"triplets:@{file}", layout="column")[0].dataset == parse_tasks(f"triplets:@{file}")[0].dataset
    assert parse_tasks(f"triplets:@{file}", layout="line")[0].dataset != parse_tasks(f"triplets:@{file}")[0].dataset


def test_options_that_do_not_change_parsing_leave_the_name(tmp_path) -> None:
    file = _write(tmp_path, "labels.tsv", "".join(f"{k % 2}\ttext {k}\n" for k in range(24)))
    assert parse_tasks(f"clustering:@{file}", seed=1)[0].dataset == parse_tasks(f"clustering:@{file}", seed=0)[0].dataset


def test_stored_results_of_one_file_are_never_served_for_another_of_the_same_name(tmp_path) -> None:
    """The issue's case: a different grouped file with the same name got the first file's counts."""
    db = ResultsDB(tmp_path / "results.sqlite")
    method = FakeMethod(spec="content")
    totals = []
    for folder, groups in (("one", 2), ("two", 3)):
        file = _groups_file(tmp_path / folder, groups)
        run = evaluate([method], parse_tasks(f"triplets:@{file}"), db=db, log=lambda message: None)
        assert not run.reused
        totals.append(next(r.value for r in run.records if r.metric == "total"))
        expected = user_files.load_grouped_texts(file).triplet_count()
        assert totals[-1] == expected
    assert totals == [8 * 3 * 4, 12 * 3 * 8]  # anchors x positives x negatives of each file
    again = evaluate([method], parse_tasks(f"triplets:@{_groups_file(tmp_path / 'one', 2)}"), db=db, log=lambda m: None)
    assert again.reused and next(r.value for r in again.records if r.metric == "total") == totals[0]


# --- a NaN metric is shown, warned about, never stored, and never stops the run (item 8) ---------------

def test_a_nan_metric_is_warned_about_and_not_stored(tmp_path) -> None:
    constant = _write(tmp_path, "constant.tsv", "".join(f"text {k}\tother {k}\t3\n" for k in range(6)))
    labelled = _write(tmp_path, "labels.tsv", "".join(f"{k % 2}\ttext {k}\n" for k in range(12)))
    db = ResultsDB(tmp_path / "results.sqlite")
    tasks = parse_tasks(f"sts:@{constant},clustering:@{labelled}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = evaluate([FakeMethod()], tasks, db=db, log=lambda message: None)
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert [re.sub(r"@[0-9a-f]{8}", "@…", message).split(" of ")[0] for message in said] == [
        f"sts/constant@… user {metric}" for metric in ("spearman", "pearson", "kendall_b", "kendall_c")]
    assert all(message.endswith("is NaN (undefined, e.g. constant scores); not stored") for message in said)
    sts = [r for r in run.records if r.task == "sts"]
    assert sts and all(np.isnan(r.value) for r in sts)  # shown to the caller as NaN
    stored = db.records()
    assert stored and {r.task for r in stored} == {"clustering"}  # the run went on; nothing NaN stored
    assert all(np.isfinite(r.value) for r in stored)


def test_the_results_database_refuses_a_nan_record_by_name(tmp_path) -> None:
    from embedlab.evaluation.records import Record

    db = ResultsDB(tmp_path / "results.sqlite")
    good = Record("m", "sts", "d", "all", "pearson", 0.5, 3)
    bad = Record("m", "sts", "d", "all", "spearman", float("nan"), 3)
    with pytest.raises(ValueError, match=r"record 1 \(sts/d all spearman\) is NaN"):
        db.add([good, bad], fingerprint="f")
    assert db.records() == []  # all or nothing


def test_reading_a_missing_results_database_creates_nothing(tmp_path) -> None:
    missing = tmp_path / "sub" / "missing.sqlite"
    with pytest.raises(FileNotFoundError, match=r"results database not found: .*missing.sqlite"):
        ResultsDB(missing, create=False)
    assert not missing.exists() and not missing.parent.exists()


def test_a_damaged_results_database_raises_a_sqlite_error(tmp_path) -> None:
    damaged = tmp_path / "results.sqlite"
    damaged.write_bytes(b"this is not a database" * 200)
    with pytest.raises(sqlite3.DatabaseError):
        ResultsDB(damaged, create=False).records()


# --- a classification file too small for its folds names the file (item 11) ----------------------------

def test_a_classification_file_too_small_for_its_folds_names_the_file(tmp_path) -> None:
    file = _write(tmp_path, "tiny.tsv", "0\ta\n1\tb\n0\tc\n1\td\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DataFormatError, match=r"tiny.tsv: 4 texts \(per label \{'0': 2, '1': 2\}\) are too few "
                                                  r"for nested 10x10-fold cross-validation"):
            evaluate([FakeMethod()], parse_tasks(f"classification:@{file}"), log=lambda message: None)


# --- spec options are validated when the spec is read (item 6) ------------------------------------------

@pytest.mark.parametrize("option, why", [
    ("lr=nan", "must be a finite number"), ("lr=inf", "must be a finite number"),
    ("lr=-0.1", "must be positive"), ("epochs=0", "must be at least 1"),
    ("epochs=nan", "must be a whole number"), ("seed=-3", "must be at least 0"), ("seed=1.5", "must be a whole number"),
])
def test_bad_neural_options_fail_when_the_spec_is_read(option, why) -> None:
    from embedlab.registry import parse
    from embedlab.spec import SpecError

    key, value = option.split("=")
    with pytest.raises(SpecError, match=re.escape(f"option {key}={value!r}: {why}")):
        parse(f"neural:minilm,{option}")
