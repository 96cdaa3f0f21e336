"""Tests for embedlab.data.user_files: the user's scored pairs, labelled and grouped texts in TSV, CSV and JSON lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.data import DataFormatError, user_files


def test_user_scored_pairs_formats(tmp_path: Path) -> None:
    tsv = tmp_path / "p.tsv"
    tsv.write_text("text1\ttext2\tscore\na\tb\t1.5\nc\td\t2\n")
    csv = tmp_path / "p.csv"
    csv.write_text('a,"b, with comma",1.5\nc,d,2\n')
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"text1": "a", "text2": "b", "score": 1.5}\n\n{"sentence1": "c", "sentence2": "d", "score": 2}\n')
    for file in (tsv, csv, jsonl):
        data = user_files.load_scored_pairs(file)
        assert len(data) == 2 and data.scores.tolist() == [1.5, 2.0] and data.first == ["a", "c"]
    assert user_files.load_scored_pairs(csv).second[0] == "b, with comma"
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t1\nc\td\tmany\n")
    with pytest.raises(DataFormatError, match=r"bad.tsv, line 2: score 'many'"):
        user_files.load_scored_pairs(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text1": "a", "text2": "b", "score": 1}\n{"text1": "a"\n')
    with pytest.raises(DataFormatError, match="broken.jsonl, line 2"):
        user_files.load_scored_pairs(broken)
    with pytest.raises(FileNotFoundError, match="nothere.tsv"):
        user_files.load_scored_pairs(tmp_path / "nothere.tsv")


def test_user_grouped_and_labelled_texts(tmp_path: Path) -> None:
    column = tmp_path / "g.tsv"
    column.write_text("g1\tx\ng2\ty\ng1\tz\n")
    data = user_files.load_grouped_texts(column)
    assert data.texts == ["x", "y", "z"] and data.groups.tolist() == [0, 1, 0] and data.triplet_count() == 2
    per_line = tmp_path / "g.jsonl"
    per_line.write_text('["x", "z"]\n{"texts": ["y"]}\n')
    lined = user_files.load_grouped_texts(per_line, layout="line")
    assert lined.texts == ["x", "z", "y"] and lined.groups.tolist() == [0, 0, 1]
    single = tmp_path / "one.tsv"
    single.write_text("a\tb\tc\n")
    with pytest.raises(DataFormatError, match="at least two groups"):
        user_files.load_grouped_texts(single, layout="line")
    labelled = tmp_path / "l.csv"
    labelled.write_text("text,label\nhello,greet\nbye,leave\nhi,greet\n")
    texts = user_files.load_labelled_texts(labelled)
    assert texts.texts == ["hello", "bye", "hi"] and texts.labels.tolist() == [0, 1, 0] and texts.label_names == ["greet", "leave"]
    wrong = tmp_path / "w.tsv"
    wrong.write_text("a\tb\nc\n")
    with pytest.raises(DataFormatError, match="w.tsv, line 2"):
        user_files.load_labelled_texts(wrong)
