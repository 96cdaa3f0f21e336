"""A user's own unlabelled texts, or text pairs, for the task-free evaluations ``alignsim:@FILE``,
``isotropy:@FILE`` and ``alignment:@FILE`` (docs/alignsim.md, "Your own texts").

Texts come in any format ``embedlab embed`` reads (:class:`~embedlab.data.corpus.Corpus`: ``.txt`` one text a
line, ``.jsonl`` with ``text``, ``.csv``/``.tsv`` with a ``text`` column, ``.parquet`` with a ``text`` column).
Pairs are two text columns and an optional label (0/1) or score (0–5): ``text1``/``text2`` (or ``sentence1`` …)
with ``label`` or ``score`` in JSON lines, a CSV/TSV file of 2 or 3 fields a row (header optional, as every
user file of :mod:`embedlab.data.user_files`) or a Parquet file with those columns.

Every file is refused before any encoding when it is empty, and, naming file and line, when a line is not UTF-8
or holds a control character (binary content): embedding it would give a number for bytes that were never text.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError, encoding_hint
from embedlab.data.corpus import Corpus, corpus_format
from embedlab.data.sentences import split_sentences
from embedlab.data.user_files import load_text_pairs

# fewer sentences than this: a mean over items and its bootstrap interval would say nothing
MIN_SENTENCES = 20
# a pair whose score reaches this (0–5 scale) is a positive pair (as STS-B's "mostly equivalent")
POSITIVE_SCORE = 4.0
_ALLOWED_CONTROLS = frozenset("\t\n\r")


@dataclass(frozen=True)
class OwnTexts:
    """The distinct sentences of a user's file, each with the line (or row) it first came from."""

    source: str
    sentences: list[str]
    lines: list[int]
    texts: int  # texts (lines, records, rows) read
    repeats: int  # sentences that repeat an earlier one (merged into it, counted here)


@dataclass(frozen=True)
class OwnPairs:
    """A user's text pairs; ``positive`` marks the paraphrase / similar pairs (every pair when the file has
    neither a label nor a score)."""

    source: str
    first: list[str]
    second: list[str]
    positive: np.ndarray  # bool, one per pair
    lines: list[int]

    def positive_pairs(self) -> list[tuple[str, str]]:
        return [(a, b) for a, b, keep in zip(self.first, self.second, self.positive) if keep]


def check_text_content(path: Path) -> None:
    """Refuse, naming file and line, a file whose bytes are not UTF-8 text (binary content, another encoding).

    Parquet is binary by design: its text cells are checked as they are read (:func:`_check_cell`)."""
    if corpus_format(path) == "parquet":
        return
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                hint = encoding_hint(raw) if number == 1 else ""
                raise DataFormatError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte {error.start}): binary or "
                                      f"undecodable content{hint}; give a UTF-8 text file") from None
            _check_cell(line, f"{path}:{number}")


def _check_cell(text: str, where: str) -> None:
    for position, character in enumerate(text):
        if character not in _ALLOWED_CONTROLS and unicodedata.category(character) == "Cc":
            raise DataFormatError(f"{where}: binary content (control character U+{ord(character):04X} at character "
                                  f"{position + 1}); give a UTF-8 text file")


def _refuse_empty(path: Path) -> None:
    if not path.read_bytes().strip():
        raise DataFormatError(f"{path}: empty file, no texts to evaluate")


def is_pairs_file(path: Path) -> bool:
    """Whether ``path`` holds text pairs (``text1``/``text2`` columns; a CSV/TSV file without a ``text`` header)
    rather than single texts."""
    kind = corpus_format(path)
    if kind == "txt":
        return False
    if kind == "parquet":
        import pyarrow.parquet as pq

        return "text" not in pq.ParquetFile(path).schema_arrow.names
    with path.open("rb") as stream:  # undecodable bytes are refused later, naming their line
        first = next((line for line in stream if line.strip()), b"").decode("utf-8", errors="replace")
    if kind == "jsonl":
        try:
            return "text" not in json.loads(first)  # a texts record has "text"; a pairs record "text1" …
        except (ValueError, TypeError):  # not a JSON object: the texts reader names the line
            return False
    separator = "\t" if kind == "tsv" else ","
    return "text" not in [name.strip().strip('"').lower() for name in first.split(separator)]


def read_own_texts(path: str | Path, minimum: int = MIN_SENTENCES, split: bool = True) -> OwnTexts:
    """The distinct sentences of a texts file: each text split into its sentences (pysbd, the splitter of
    :mod:`embedlab.data.sentences`) unless ``split`` is False; fewer than ``minimum`` is refused."""
    file = Path(path).expanduser()
    corpus = Corpus(file)
    _refuse_empty(file)
    check_text_content(file)
    seen: dict[str, int] = {}
    texts = repeats = 0
    for record in corpus.records():
        texts += 1
        where = f"{file}: row {record.line}" if corpus.format == "parquet" else f"{file}:{record.line}"
        _check_cell(record.text, where)
        for sentence in split_sentences(record.text) if split else [record.text.strip()]:
            if sentence in seen:
                repeats += 1
            else:
                seen[sentence] = record.line
    _refuse_few(file, len(seen), minimum, "sentences" if split else "texts")
    return OwnTexts(str(file), list(seen), list(seen.values()), texts, repeats)


def _refuse_few(file: Path, count: int, minimum: int, what: str) -> None:
    if count < minimum:
        raise DataFormatError(f"{file}: {count} usable {what} (distinct, non-empty), at least {minimum} are needed: "
                              "means over fewer items, and their intervals, would say nothing")


def read_own_pairs(path: str | Path, minimum: int = MIN_SENTENCES) -> OwnPairs:
    """A pairs file: positives are label 1, or score ≥ :data:`POSITIVE_SCORE` on a 0–5 scale, or every pair
    when there is neither; fewer than ``minimum`` distinct first texts of positive pairs is refused."""
    file = Path(path).expanduser()
    if not file.exists():
        raise FileNotFoundError(f"data file not found: {file.resolve()} (given as {str(path)!r})")
    _refuse_empty(file)
    check_text_content(file)
    pairs = _parquet_pairs(file) if corpus_format(file) == "parquet" else load_text_pairs(file)
    first, second, column, values, lines = pairs
    if column is None:
        positive = np.ones(len(first), dtype=bool)
    elif column == "label":
        bad = [line for line, value in zip(lines, values) if value not in (0.0, 1.0)]
        if bad:
            raise DataFormatError(f"{file}, line {bad[0]}: a label must be 0 or 1 (a 0–5 similarity goes in a 'score' column)")
        positive = np.asarray(values) == 1.0
    else:
        positive = np.asarray(values) >= POSITIVE_SCORE
    _refuse_few(file, len({a for a, keep in zip(first, positive) if keep}), minimum, "positive pairs' first texts")
    return OwnPairs(str(file), first, second, positive, lines)


def _parquet_pairs(file: Path) -> tuple[list[str], list[str], str | None, list[float], list[int]]:
    """(first texts, second texts, ``label``/``score``/None, their values, row numbers) of a Parquet pairs file."""
    import pyarrow.parquet as pq

    table = pq.read_table(file)
    names = table.column_names
    if not {"text1", "text2"} <= set(names):
        raise DataFormatError(f"{file}: a pairs file needs 'text1' and 'text2' columns (columns: {', '.join(names)})")
    column = next((name for name in ("label", "score") if name in names), None)
    first, second = table.column("text1").to_pylist(), table.column("text2").to_pylist()
    for row, (a, b) in enumerate(zip(first, second), start=1):
        for text in (a, b):
            if not isinstance(text, str) or not text.strip():
                raise DataFormatError(f"{file}: row {row}: 'text1' and 'text2' must be non-empty strings")
            _check_cell(text, f"{file}: row {row}")
    values = [float(v) for v in table.column(column).to_pylist()] if column else []
    return first, second, column, values, list(range(1, len(first) + 1))
