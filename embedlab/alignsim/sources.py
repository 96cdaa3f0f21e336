"""Readers for the paraphrase data ALIGN-SIM samples from (paper §5.1, Appendix A.2).

QQP (first 10,000 rows of the Quora release), PAWS-Wiki (labeled final dev + test), MRPC (the GLUE
train split the paper uses: 3,668 pairs, 2,474 positive) and AFIN (negated sentence + affirmative
interpretation). Files are read from the shared data folder (``embedlab.paths.data_path``).

These readers are local to ALIGN-SIM until the evaluation harness' ``embedlab.datasets`` lands on
main; then they should delegate to it.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from embedlab.paths import data_path

PARAPHRASE_DATASETS = ("qqp", "paws", "mrpc")
ALL_DATASETS = PARAPHRASE_DATASETS + ("afin",)


@dataclass(frozen=True)
class SentencePair:
    """A labelled sentence pair; ``source`` says file and line for error messages and provenance."""

    text_a: str
    text_b: str
    label: int
    source: str


def _check_text(text: str, where: str, column: str) -> str:
    if text is None or not text.strip():
        raise ValueError(f"{where}: empty {column}")
    return text.strip()


def _check_label(value: str, where: str) -> int:
    if value not in ("0", "1"):
        raise ValueError(f"{where}: label must be 0 or 1, got {value!r}")
    return int(value)


def _read_table(path: Path, columns: tuple[str, str, str], **reader_options) -> list[SentencePair]:
    """Rows of a delimited file with a header, reading the named (text_a, text_b, label) columns."""
    pairs = []
    with open(path, newline="", encoding="utf-8") as stream:
        reader = csv.reader(stream, **reader_options)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file")
        missing = [name for name in columns if name not in header]
        if missing:
            raise ValueError(f"{path}: header lacks column(s) {missing}; found {header}")
        index_a, index_b, index_label = (header.index(name) for name in columns)
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if len(row) != len(header):
                raise ValueError(f"{where}: expected {len(header)} fields, got {len(row)}")
            pairs.append(
                SentencePair(
                    _check_text(row[index_a], where, columns[0]),
                    _check_text(row[index_b], where, columns[1]),
                    _check_label(row[index_label], where),
                    where,
                )
            )
    return pairs


def read_qqp() -> list[SentencePair]:
    path = data_path("paraphrase", "qqp", "quora_duplicate_questions_first10000.tsv")
    return _read_table(path, ("question1", "question2", "is_duplicate"), delimiter="\t")


def read_paws() -> list[SentencePair]:
    pairs = []
    for split in ("dev.tsv", "test.tsv"):
        path = data_path("paraphrase", "paws_wiki", split)
        # PAWS quotes nothing: a '"' inside a sentence is literal text
        pairs += _read_table(path, ("sentence1", "sentence2", "label"), delimiter="\t", quoting=csv.QUOTE_NONE)
    return pairs


def read_mrpc() -> list[SentencePair]:
    path = data_path("paraphrase", "mrpc", "mrpc_glue_train.csv")
    return _read_table(path, ("sentence1", "sentence2", "label"))


def read_afin() -> list[SentencePair]:
    """AFIN: (sentence with negation, its affirmative interpretation); every pair is a paraphrase (label 1)."""
    path = data_path("paraphrase", "afin", "afin.jsonl")
    pairs = []
    with open(path, encoding="utf-8") as stream:
        for line_number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not valid JSON ({error})") from error
            for field in ("sentence", "affirmative interpretation"):
                if field not in row:
                    raise ValueError(f"{where}: missing field {field!r}")
            pairs.append(
                SentencePair(
                    _check_text(row["sentence"], where, "sentence"),
                    _check_text(row["affirmative interpretation"], where, "affirmative interpretation"),
                    1,
                    where,
                )
            )
    return pairs


READERS = {"qqp": read_qqp, "paws": read_paws, "mrpc": read_mrpc, "afin": read_afin}


def read_dataset(name: str) -> list[SentencePair]:
    if name not in READERS:
        raise ValueError(f"unknown ALIGN-SIM dataset {name!r}; choose from {', '.join(ALL_DATASETS)}")
    return READERS[name]()
