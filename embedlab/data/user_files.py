"""The user's own data files: scored pairs, labelled texts and grouped texts as TSV, CSV or JSON lines
(formats in docs/evaluation.md, "User data"); a bad line gives an error naming the file and the line."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.data import DataFormatError, unicode_problem
from embedlab.data.containers import GroupedTexts, LabelledTexts, ScoredPairs, grouped
from embedlab.data.reading import file_lines, json_lines, parse_number, read_text


def _user_path(path: str | Path) -> Path:
    file = Path(path).expanduser()
    if not file.exists():  # a folder or an unreadable file fails when read, with the OS's reason and the path
        raise FileNotFoundError(f"data file not found: {file.resolve()} (given as {str(path)!r})")
    return file


def _file_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "tsv"


def _table_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a TSV or CSV file, blank lines skipped."""
    text = read_text(path)
    if _file_kind(path) == "csv":
        reader = csv.reader(io.StringIO(text))
        for fields in reader:
            if fields and any(f.strip() for f in fields):
                yield reader.line_num, fields
        return
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line.split("\t")


# Accepted names of each column: JSON keys, and the header names of a TSV/CSV file (case-insensitive).
TEXT1_KEYS = ("text1", "sentence1", "text_a", "s1", "first")


TEXT2_KEYS = ("text2", "sentence2", "text_b", "s2", "second")


SCORE_KEYS = ("score", "label", "similarity")


TEXT_KEYS = ("text", "sentence")


LABEL_KEYS = ("label", "class", "group")


GROUP_KEYS = ("group", "label", "id")


# The columns of each user format, in the order a file without a header lists them.
SCORED_COLUMNS = {"text1": TEXT1_KEYS, "text2": TEXT2_KEYS, "score": SCORE_KEYS}


LABELLED_COLUMNS = {"label": LABEL_KEYS, "text": TEXT_KEYS}


GROUPED_COLUMNS = {"group": GROUP_KEYS, "text": TEXT_KEYS}


def _header_order(fields: list[str], columns: dict[str, tuple[str, ...]]) -> list[str] | None:
    """The columns a header row names, in its order; None when the row is not a header.

    The one header rule of every user TSV/CSV format: a first row is a header iff each of its fields,
    stripped and lower-cased, is an accepted name of a different column and every column is named.
    """
    names = [field.strip().lower() for field in fields]
    order = [next((column for column, accepted in columns.items() if name in accepted), None) for name in names]
    return order if len(order) == len(columns) and set(order) == set(columns) else None


def _user_records(file: Path, columns: dict[str, tuple[str, ...]]) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, {column: raw value}) of a user file: JSON lines (each column from the first of its
    accepted keys present) or TSV/CSV (one field per column; a header row follows :func:`_header_order`)."""
    if _file_kind(file) == "jsonl":
        for number, row in json_lines(file):
            yield number, {column: _pick(row, names, file, number) for column, names in columns.items()}
        return
    order = list(columns)
    for position, (number, fields) in enumerate(_table_rows(file)):
        header = _header_order(fields, columns) if position == 0 else None
        if header is not None:
            order = header
            continue
        if len(fields) != len(columns):
            raise DataFormatError(
                f"{file}, line {number}: expected {len(columns)} fields ({', '.join(order)}), found {len(fields)}"
            )
        yield number, dict(zip(order, fields))


def _pick(row: dict, names: tuple[str, ...], path: Path, number: int) -> object:
    for name in names:
        if name in row:
            return row[name]
    raise DataFormatError(f"{path}, line {number}: missing field (one of {', '.join(names)})")


def _json_type(value: object) -> str:
    """How JSON spells the type of a parsed value (for messages about a file the user wrote in JSON)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "a number", float: "a number", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _text(value: object, path: Path, number: int, column: str) -> str:
    if not isinstance(value, str):
        raise DataFormatError(f"{path}, line {number}: {column} must be a string, found {_json_type(value)}")
    problem = unicode_problem(value)
    if problem:
        raise DataFormatError(f"{path}, line {number}: {column} has a {problem}")
    return value


def _score(value: object, path: Path, number: int) -> float:
    if isinstance(value, str):
        return parse_number(value, path, number, "score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataFormatError(f"{path}, line {number}: score must be a number, found {_json_type(value)}")
    return parse_number(str(value), path, number, "score")


def _label(value: object, path: Path, number: int, column: str) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataFormatError(f"{path}, line {number}: {column} must be a string or a whole number, found {_json_type(value)}")
    return str(value)


def load_scored_pairs(path: str | Path) -> ScoredPairs:
    """User scored pairs: ``text1<TAB>text2<TAB>score`` rows (TSV/CSV, optional header) or JSON lines
    with ``text1``, ``text2``, ``score``."""
    file = _user_path(path)
    first, second, scores = [], [], []
    for number, row in _user_records(file, SCORED_COLUMNS):
        first.append(_text(row["text1"], file, number, "text1"))
        second.append(_text(row["text2"], file, number, "text2"))
        scores.append(_score(row["score"], file, number))
    if not first:
        raise DataFormatError(f"{file}: no scored pairs found")
    return ScoredPairs(file.stem, "user", first, second, np.array(scores, dtype=np.float64))


def _number_labels(raw: list[str]) -> tuple[np.ndarray, list[str]]:
    names = sorted(set(raw))
    lookup = {name: index for index, name in enumerate(names)}
    return np.array([lookup[r] for r in raw], dtype=np.int64), names


def load_labelled_texts(path: str | Path) -> LabelledTexts:
    """User labelled texts: ``label<TAB>text`` rows (TSV/CSV; a ``label,text`` or ``text,label`` header is
    honoured) or JSON lines with ``text`` and ``label``."""
    file = _user_path(path)
    texts, raw = [], []
    for number, row in _user_records(file, LABELLED_COLUMNS):
        texts.append(_text(row["text"], file, number, "text"))
        raw.append(_label(row["label"], file, number, "label"))
    if not texts:
        raise DataFormatError(f"{file}: no labelled texts found")
    labels, names = _number_labels(raw)
    return LabelledTexts(file.stem, "user", texts, labels, names)


def load_grouped_texts(path: str | Path, layout: str = "column") -> GroupedTexts:
    """User grouped texts for triplets.

    ``layout="column"``: one text per row with a group id (``group<TAB>text`` rows with the usual optional
    header, or JSON lines with ``group`` and ``text``). ``layout="line"``: one group per line and no header
    (its texts tab-separated or CSV fields, or a JSON list of strings / an object with ``texts``).
    Groups with one text give no positives.
    """
    if layout not in ("column", "line"):
        raise InputError(f"unknown grouped-texts layout {layout!r}; expected 'column' or 'line'")
    file = _user_path(path)
    texts: list[str] = []
    groups: list = []
    if layout == "column":
        for number, row in _user_records(file, GROUPED_COLUMNS):
            groups.append(_label(row["group"], file, number, "group"))
            texts.append(_text(row["text"], file, number, "text"))
    elif _file_kind(file) == "jsonl":
        for number, line in enumerate(file_lines(file), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(f"{file}, line {number}: not valid JSON ({error.msg})") from None
            members = row.get("texts") if isinstance(row, dict) else row
            if not isinstance(members, list):
                raise DataFormatError(f"{file}, line {number}: expected a list of strings (or {{\"texts\": [...]}})")
            texts += [_text(member, file, number, f"text {index + 1}") for index, member in enumerate(members)]
            groups += [number] * len(members)
    else:
        for number, fields in _table_rows(file):
            members = [f for f in fields if f.strip()]
            texts += members
            groups += [number] * len(members)
    if not texts:
        raise DataFormatError(f"{file}: no grouped texts found")
    result = grouped(file.stem, texts, groups)
    if int(result.groups.max()) + 1 < 2:
        raise DataFormatError(f"{file}: triplets need at least two groups, found one")
    return result


# The optional third column of a pairs file for task-free evaluation: a 0/1 label or a 0–5 score.
PAIR_VALUE_KEYS = {"label": ("label",), "score": ("score", "similarity")}


def _pair_header(fields: list[str]) -> tuple[list[str], str | None] | None:
    """The columns a pairs header names (text1, text2 and optionally label or score) and which value column it
    has; None when the row is not a header."""
    columns = {"text1": TEXT1_KEYS, "text2": TEXT2_KEYS}
    if len(fields) == 3:
        names = {field.strip().lower() for field in fields}
        value = next((kind for kind, keys in PAIR_VALUE_KEYS.items() if names & set(keys)), None)
        if value is None:
            return None
        columns[value] = PAIR_VALUE_KEYS[value]
    order = _header_order(fields, columns)
    if order is None:
        return None
    return order, next((column for column in order if column in PAIR_VALUE_KEYS), None)


def _pair_rows(file: Path) -> tuple[list[tuple[int, dict[str, object]]], str | None]:
    """(line, {text1, text2[, label or score]}) of a pairs file, and the value column's kind (None: no value)."""
    rows: list[tuple[int, dict[str, object]]] = []
    if _file_kind(file) == "jsonl":
        value = None
        for position, (number, row) in enumerate(json_lines(file)):
            if position == 0:
                value = next((kind for kind, keys in PAIR_VALUE_KEYS.items() if any(key in row for key in keys)), None)
            picked = {"text1": _pick(row, TEXT1_KEYS, file, number), "text2": _pick(row, TEXT2_KEYS, file, number)}
            if value is not None:
                picked[value] = _pick(row, PAIR_VALUE_KEYS[value], file, number)
            rows.append((number, picked))
        return rows, value
    order, value, width = ["text1", "text2"], None, None
    for position, (number, fields) in enumerate(_table_rows(file)):
        header = _pair_header(fields) if position == 0 else None
        if header is not None:
            order, value = header
            width = len(fields)
            continue
        if width is None:  # no header: two fields, or a third holding a label or a score (decided below)
            width = len(fields)
            if width not in (2, 3):
                raise DataFormatError(f"{file}, line {number}: expected 2 or 3 fields (text1, text2[, label or score]), found {width}")
            order = ["text1", "text2", "value"][:width]
        if len(fields) != width:
            raise DataFormatError(f"{file}, line {number}: expected {width} fields ({', '.join(order)}), found {len(fields)}")
        rows.append((number, dict(zip(order, fields))))
    if "value" in order:  # a headerless third column: 0/1 throughout is a label, anything else a 0–5 score
        numbers = [_score(row["value"], file, number) for number, row in rows]
        value = "label" if set(numbers) <= {0.0, 1.0} else "score"
        rows = [(number, {"text1": row["text1"], "text2": row["text2"], value: row["value"]}) for number, row in rows]
    return rows, value


def load_text_pairs(path: str | Path) -> tuple[list[str], list[str], str | None, list[float], list[int]]:
    """Text pairs with an optional label (0/1) or score (0–5), for task-free evaluation: (first texts, second
    texts, ``"label"``, ``"score"`` or None, the values, line numbers). JSON lines with ``text1``, ``text2`` and
    optionally ``label`` or ``score``; TSV/CSV rows of 2 or 3 fields, with an optional header (a headerless third
    column of only 0 and 1 is a label, else a score)."""
    file = _user_path(path)
    rows, value = _pair_rows(file)
    first, second, values, lines = [], [], [], []
    for number, row in rows:
        first.append(_text(row["text1"], file, number, "text1"))
        second.append(_text(row["text2"], file, number, "text2"))
        if value is not None:
            values.append(_score(row[value], file, number))
        lines.append(number)
    if not first:
        raise DataFormatError(f"{file}: no text pairs found")
    return first, second, value, values, lines
