"""Paraphrase pair sets: MRPC (SentEval's split, and the GLUE train split of the neural-embeddings paper
§3.2–3.3), PAWS-Wiki, QQP and AFIN."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError
from embedlab.data.containers import LabelledPairs
from embedlab.data.reading import check_rows, file_lines, json_lines, read_text, senteval_text, split_fields
from embedlab.errors import InputError
from embedlab.runtime.settings import data_path


def mrpc(split: str) -> LabelledPairs:
    """MRPC as SentEval reads it: ``train`` (4,076) or ``test`` (1,725) of msr_paraphrase_*.txt."""
    if split not in ("train", "test"):
        raise InputError(f"unknown MRPC split {split!r}; expected train or test (or use mrpc_glue_train())")
    path = data_path("paraphrase", "mrpc", f"msr_paraphrase_{split}.txt")
    first, second, labels = [], [], []
    for number, line in enumerate(file_lines(path)[1:], start=2):
        parts = split_fields(line, path, number, 5)
        if parts[0] not in ("0", "1"):
            raise DataFormatError(f"{path}, line {number}: quality {parts[0]!r} is not 0 or 1")
        labels.append(int(parts[0]))
        first.append(senteval_text(parts[3]))
        second.append(senteval_text(parts[4]))
    check_rows(f"mrpc-{split}", len(first), path)
    return LabelledPairs("mrpc", split, first, second, np.array(labels, dtype=np.int64), ["different", "paraphrase"])


def mrpc_glue_train() -> LabelledPairs:
    """The GLUE train split of MRPC (3,668 pairs, 2,474 positive) — neural-embeddings paper §3.2–3.3."""
    path = data_path("paraphrase", "mrpc", "mrpc_glue_train.csv")
    with io.StringIO(read_text(path)) as stream:
        reader = csv.DictReader(stream)
        first, second, labels = [], [], []
        for row in reader:
            try:
                labels.append(int(row["label"]))
                first.append(row["sentence1"])
                second.append(row["sentence2"])
            except (KeyError, TypeError, ValueError) as error:
                raise DataFormatError(f"{path}, line {reader.line_num}: bad row ({error})") from None
    check_rows("mrpc-glue-train", len(first), path)
    return LabelledPairs("mrpc", "glue-train", first, second, np.array(labels, dtype=np.int64), ["different", "paraphrase"])


def _tsv_with_header(path: Path, columns: tuple[str, ...], quoted: bool = False) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a tab-separated file with a header; ``quoted``: fields may be CSV-quoted and span lines (QQP)."""
    if quoted:
        reader = csv.reader(io.StringIO(read_text(path)), delimiter="\t")
        rows = ((reader.line_num, fields) for fields in reader)
    else:
        rows = ((number, line.split("\t")) for number, line in enumerate(file_lines(path), start=1))
    _, header = next(rows)
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataFormatError(f"{path}, line 1: header lacks column(s) {missing}")
    for number, parts in rows:
        if len(parts) != len(header):
            raise DataFormatError(f"{path}, line {number}: {len(parts)} fields, header has {len(header)}")
        yield number, dict(zip(header, parts))


def _binary_label(value: str, path: Path, number: int) -> int:
    if value not in ("0", "1"):
        raise DataFormatError(f"{path}, line {number}: label {value!r} is not 0 or 1")
    return int(value)


def paws_wiki(split: str) -> LabelledPairs:
    path = data_path("paraphrase", "paws_wiki", f"{split}.tsv")
    rows = [(n, r) for n, r in _tsv_with_header(path, ("sentence1", "sentence2", "label"))]
    check_rows(f"paws-{split}", len(rows), path)
    return LabelledPairs("paws-wiki", split, [r["sentence1"] for _, r in rows], [r["sentence2"] for _, r in rows],
                         np.array([_binary_label(r["label"], path, n) for n, r in rows]), ["different", "paraphrase"])


def qqp() -> LabelledPairs:
    path = data_path("paraphrase", "qqp", "quora_duplicate_questions_first10000.tsv")
    rows = [(n, r) for n, r in _tsv_with_header(path, ("question1", "question2", "is_duplicate"), quoted=True)]
    check_rows("qqp", len(rows), path)
    return LabelledPairs("qqp", "first10000", [r["question1"] for _, r in rows], [r["question2"] for _, r in rows],
                         np.array([_binary_label(r["is_duplicate"], path, n) for n, r in rows]),
                         ["different", "duplicate"])


def afin() -> LabelledPairs:
    """AFIN: each sentence with negation paired with its affirmative interpretation (all label 1)."""
    path = data_path("paraphrase", "afin", "afin.jsonl")
    first, second = [], []
    for number, row in json_lines(path):
        try:
            first.append(str(row["sentence"]))
            second.append(str(row["affirmative interpretation"]))
        except KeyError as error:
            raise DataFormatError(f"{path}, line {number}: missing field {error}") from None
    check_rows("afin", len(first), path)
    return LabelledPairs("afin", "all", first, second, np.ones(len(first), dtype=np.int64), ["", "affirmative"])
