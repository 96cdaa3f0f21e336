"""embedlab.data.own_texts: a user's own texts split into distinct sentences, pairs files with their positives, and
every bad file refused with one error naming the file (and the line, for binary or undecodable content)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedlab.data import DataFormatError
from embedlab.data.own_texts import is_pairs_file, read_own_pairs, read_own_texts

SENTENCES = [f"Sentence number {word} is here." for word in
             "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
             "seventeen eighteen nineteen twenty twentyone".split()]


def _lines(path, lines: list[str]):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_passages_are_split_into_sentences_and_repeats_are_merged_and_counted(tmp_path):
    passage = "The cat sat on the mat. Then it slept for an hour. Nobody woke it."
    path = _lines(tmp_path / "texts.txt", [passage] + SENTENCES[:18] + [SENTENCES[0]])
    texts = read_own_texts(path)
    # the passage gives its three sentences (pysbd), each remembering its line; the repeated last line is merged
    assert texts.sentences[:3] == ["The cat sat on the mat.", "Then it slept for an hour.", "Nobody woke it."]
    assert texts.lines[:4] == [1, 1, 1, 2]
    assert (len(texts.sentences), texts.texts, texts.repeats) == (21, 20, 1)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_every_format_embed_reads_gives_the_same_sentences(tmp_path, suffix):
    path = tmp_path / f"texts{suffix}"
    if suffix == ".jsonl":
        _lines(path, [json.dumps({"text": text}) for text in SENTENCES])
    elif suffix == ".csv":
        _lines(path, ["id,text"] + [f'{index},"{text}"' for index, text in enumerate(SENTENCES)])
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": SENTENCES}), path)
    assert not is_pairs_file(path)
    assert read_own_texts(path).sentences == SENTENCES


def test_an_empty_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"{path}: empty file"):
        read_own_texts(path)


def test_fewer_than_20_usable_sentences_are_refused_with_the_count(tmp_path):
    # 19 distinct sentences on 20 lines (one repeated): the count is of usable, distinct sentences
    path = _lines(tmp_path / "few.txt", SENTENCES[:19] + [SENTENCES[3]])
    with pytest.raises(DataFormatError, match=f"{path}: 19 usable sentences .*at least 20"):
        read_own_texts(path)
    assert len(read_own_texts(_lines(tmp_path / "enough.txt", SENTENCES[:20])).sentences) == 20


def test_binary_content_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "binary.txt"
    path.write_bytes("\n".join(SENTENCES[:2]).encode() + b"\nabc\x00\x01def\n" + "\n".join(SENTENCES).encode())
    with pytest.raises(DataFormatError, match=f"{path}:3: binary content \\(control character U\\+0000"):
        read_own_texts(path)


def test_undecodable_bytes_are_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "latin1.tsv"  # a pairs file: the user-file readers would fall back to Latin-1 silently
    path.write_bytes(b"text1\ttext2\nA caf\xe9.\tA bar.\n")
    assert is_pairs_file(path)  # telling pairs from texts reads the header only, never fails on the bytes after it
    with pytest.raises(DataFormatError, match=f"{path}:2: not valid UTF-8"):
        read_own_pairs(path)
    parquet = tmp_path / "cells.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": SENTENCES[:5] + ["bell\x07"] + SENTENCES[5:]}), parquet)
    with pytest.raises(DataFormatError, match=f"{parquet}: row 6: binary content"):
        read_own_texts(parquet)


@pytest.mark.parametrize("layout", ["label header", "score header", "no header, label", "no header, score", "jsonl", "none"])
def test_pairs_files_and_their_positives(tmp_path, layout):
    values = [1, 0, 1, 1] * 8 if "label" in layout or layout == "jsonl" else [4.5, 3.9, 4.0, 5.0] * 8
    rows = [(f"First {i} says a thing.", f"Second {i} says it too.", value) for i, value in enumerate(values)]
    path = tmp_path / ("pairs.jsonl" if layout == "jsonl" else "pairs.tsv")
    if layout == "jsonl":
        _lines(path, [json.dumps({"sentence1": a, "sentence2": b, "label": v}) for a, b, v in rows])
    elif layout == "none":
        _lines(path, [f"{a}\t{b}" for a, b, _ in rows])
    else:
        header = ["sentence1\tsentence2\t" + layout.split()[0]] if "header" in layout and "no" not in layout else []
        _lines(path, header + [f"{a}\t{b}\t{v}" for a, b, v in rows])
    assert is_pairs_file(path)
    pairs = read_own_pairs(path)
    # positives: label 1, or a 0–5 score of at least 4 (3.9 is not), or every pair of a file without either
    expected = [True] * 32 if layout == "none" else [value in (1, 4.0, 4.5, 5.0) for value in values]
    assert pairs.positive.tolist() == expected
    assert pairs.first[2] == "First 2 says a thing." and pairs.second[2] == "Second 2 says it too."


def test_a_label_outside_0_and_1_is_refused(tmp_path):
    path = _lines(tmp_path / "pairs.tsv", ["text1\ttext2\tlabel"] + [f"A {i}.\tB {i}.\t{i % 3}" for i in range(30)])
    with pytest.raises(DataFormatError, match=f"{path}, line 4: a label must be 0 or 1"):
        read_own_pairs(path)


def test_too_few_positive_pairs_are_refused(tmp_path):
    path = _lines(tmp_path / "pairs.tsv", ["text1\ttext2\tlabel"] + [f"A {i}.\tB {i}.\t{int(i < 19)}" for i in range(40)])
    with pytest.raises(DataFormatError, match="19 usable positive pairs' first texts"):
        read_own_pairs(path)
    assert np.count_nonzero(read_own_pairs(path, minimum=19).positive) == 19
