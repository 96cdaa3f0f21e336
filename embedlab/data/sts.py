"""Scored sentence pairs: STS12–16 per subset with unscored pairs skipped (SentEval layout), STS-B and
SICK (relatedness and entailment), as the pooling paper reads them (§3.5.2; SICK-E §3.5.3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError
from embedlab.data.containers import LabelledPairs, ScoredPairs
from embedlab.data.reading import check_rows, file_lines, parse_number, split_fields
from embedlab.errors import InputError
from embedlab.runtime.settings import data_path, data_root


STS_YEARS = ("sts12", "sts13", "sts14", "sts15", "sts16")


def sts_year(year: str) -> list[ScoredPairs]:
    """One STS year (``sts12`` … ``sts16``): a :class:`ScoredPairs` per subset, unscored pairs skipped."""
    year = year.lower()
    if year not in STS_YEARS:
        raise InputError(f"unknown STS year {year!r}; expected one of {', '.join(STS_YEARS)}")
    folder = data_path("sts", year.upper())
    subsets = []
    for gold_path in sorted(folder.glob("STS.gs.*.txt")):
        subset = gold_path.name[len("STS.gs."):-len(".txt")]
        input_path = data_path("sts", year.upper(), f"STS.input.{subset}.txt")
        gold_lines, input_lines = file_lines(gold_path), file_lines(input_path)
        if len(gold_lines) != len(input_lines):
            raise DataFormatError(f"{gold_path}: {len(gold_lines)} gold lines but {input_path} has {len(input_lines)}")
        first, second, scores = [], [], []
        for number, (gold, line) in enumerate(zip(gold_lines, input_lines), start=1):
            if not gold.strip():
                continue  # unscored pair: SentEval skips it
            parts = split_fields(line, input_path, number, 2)
            first.append(parts[0])
            second.append(parts[1])
            scores.append(parse_number(gold.strip(), gold_path, number, "gold score"))
        subsets.append(ScoredPairs(year, subset, first, second, np.array(scores, dtype=np.float64)))
    if not subsets:
        raise DataFormatError(f"{folder}: no STS.gs.*.txt files (data root searched: {data_root()})")
    check_rows(year, sum(len(s) for s in subsets), folder)
    return subsets


def stsb(split: str) -> ScoredPairs:
    """STS Benchmark ``train``/``dev``/``test`` (score, s1, s2 in columns 5–7)."""
    path = data_path("sts", "STSBenchmark", f"sts-{split}.csv")
    first, second, scores = [], [], []
    for number, line in enumerate(file_lines(path), start=1):
        parts = split_fields(line, path, number, 7)
        scores.append(parse_number(parts[4], path, number, "score"))
        first.append(parts[5])
        second.append(parts[6])
    check_rows(f"stsb-{split}", len(first), path)
    return ScoredPairs("stsb", split, first, second, np.array(scores, dtype=np.float64))


SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


SICK_LABELS = ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"]


def _sick_rows(split: str) -> tuple[Path, list[list[str]]]:
    if split not in SICK_FILES:
        raise InputError(f"unknown SICK split {split!r}; expected one of {', '.join(SICK_FILES)}")
    path = data_path("sts", "SICK", SICK_FILES[split])
    lines = file_lines(path)
    rows = [split_fields(line, path, number, 5) for number, line in enumerate(lines[1:], start=2)]
    check_rows(f"sick-{split}", len(rows), path)
    return path, rows


def sick_relatedness(split: str) -> ScoredPairs:
    path, rows = _sick_rows(split)
    scores = [parse_number(row[3], path, number, "relatedness score") for number, row in enumerate(rows, start=2)]
    return ScoredPairs("sick-r", split, [r[1] for r in rows], [r[2] for r in rows], np.array(scores))


def sick_entailment(split: str) -> LabelledPairs:
    path, rows = _sick_rows(split)
    labels = []
    for number, row in enumerate(rows, start=2):
        if row[4] not in SICK_LABELS:
            raise DataFormatError(f"{path}, line {number}: entailment label {row[4]!r} is not one of {SICK_LABELS}")
        labels.append(SICK_LABELS.index(row[4]))
    return LabelledPairs("sick-e", split, [r[1] for r in rows], [r[2] for r in rows],
                         np.array(labels, dtype=np.int64), SICK_LABELS)
