"""Shipped sentence boundaries of the known WikiText-2 files: pysbd's split as character offsets, never the text.

pysbd's sentences of a paragraph are stripped substrings of it (:func:`embedlab.data.sentences.split_sentences`
strips each piece it cuts from the text), so a corpus's split is fully described by each sentence's
(paragraph index, start, end). For the three WikiText-2 files of the shared data, each identified by the
SHA-256 of its bytes (never by path or modification time), these offsets ship in
``embedlab/resources/wikitext2-<split>-sentence-spans.npz``: the sentences are rebuilt by slicing the
detokenised paragraphs instead of running pysbd (≈ 31 CPU s for train). ``scripts/wikitext_sentence_spans.py``
regenerates the files from pysbd, and with ``--check`` compares the sliced sentences of the full train, valid
and test files with pysbd's split of them (list equality; it held for all three when the files were made).

A file is checked before it is used: its arrays' names, dtypes and ranges, the paragraph count, then the
SHA-256 of the rebuilt sentences (joined by newlines) against the one stored beside the offsets. A file that
fails is refused with a :class:`~embedlab.data.DataFormatError` naming it: a wrong sentence list is never used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError
from embedlab.data.reading import read_npz_fields, write_npz

SPANS_FOLDER = Path(__file__).resolve().parents[1] / "resources"
_ARRAYS = ("paragraph", "start", "end")
_FIELDS = (*_ARRAYS, "file_sha256", "sentences_sha256", "paragraphs")


def spans_file(split: str, folder: Path = SPANS_FOLDER) -> Path:
    """Where the shipped sentence offsets of WikiText-2 ``split`` live."""
    return folder / f"wikitext2-{split}-sentence-spans.npz"


@dataclass(frozen=True)
class SentenceSpans:
    """Sentence ``i`` is ``paragraphs[paragraph[i]][start[i]:end[i]]`` of the file whose bytes hash to ``file_sha256``."""

    path: Path
    file_sha256: str
    sentences_sha256: str
    paragraphs: int
    paragraph: np.ndarray
    start: np.ndarray
    end: np.ndarray


def sentence_offsets(paragraphs: Sequence[str], paragraph_sentences: Sequence[Sequence[str]]) -> np.ndarray:
    """(paragraph, start, end) of every sentence, in order: each found in its paragraph after the previous one.

    Where a sentence occurs more than once, the first occurrence after the previous sentence is taken; its
    slice is the same string, which is all the offsets must give back."""
    if len(paragraphs) != len(paragraph_sentences):
        raise ValueError(f"{len(paragraphs)} paragraphs but sentences of {len(paragraph_sentences)}")
    rows = []
    for index, (paragraph, sentences) in enumerate(zip(paragraphs, paragraph_sentences)):
        position = 0
        for sentence in sentences:
            start = paragraph.find(sentence, position)
            if start < 0 or not sentence:
                raise ValueError(f"paragraph {index}: sentence {sentence[:60]!r} is not a substring after character {position}")
            position = start + len(sentence)
            rows.append((index, start, position))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def write_sentence_spans(path: Path, file_sha256: str, paragraphs: Sequence[str],
                         paragraph_sentences: Sequence[Sequence[str]]) -> None:
    """Write the offsets of ``paragraph_sentences`` in ``paragraphs`` (the file's SHA-256 and the sentences' beside them)."""
    offsets = sentence_offsets(paragraphs, paragraph_sentences)
    sentences = [sentence for sentences_of_one in paragraph_sentences for sentence in sentences_of_one]
    arrays = {name: _compact(offsets[:, column]) for column, name in enumerate(_ARRAYS)}
    write_npz(path, {**arrays, "file_sha256": np.array(file_sha256), "paragraphs": np.array(len(paragraphs)),
                     "sentences_sha256": np.array(_sentences_digest(sentences))})


def read_sentence_spans(path: Path) -> SentenceSpans:
    """The offsets stored at ``path``, after checking their names, dtypes and ranges (DataFormatError if not)."""
    fields = read_npz_fields(path, _FIELDS, "sentence-offset")
    paragraph, start, end = (fields[name] for name in _ARRAYS)
    if any(array.ndim != 1 or array.dtype.kind != "u" or len(array) != len(paragraph) for array in (paragraph, start, end)):
        raise DataFormatError(f"{path}: paragraph, start and end must be unsigned integer vectors of one length")
    if np.any(start >= end) or np.any(np.diff(paragraph.astype(np.int64)) < 0):
        raise DataFormatError(f"{path}: a sentence is empty or ends before it starts, or the paragraphs are out of order")
    return SentenceSpans(path, str(fields["file_sha256"]), str(fields["sentences_sha256"]), int(fields["paragraphs"]),
                         paragraph, start, end)


def sliced_sentences(paragraphs: Sequence[str], paragraph: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[str]:
    """``paragraphs[paragraph[i]][start[i]:end[i]]`` for every ``i``; ValueError if an offset lies outside its paragraph."""
    lengths = np.fromiter((len(text) for text in paragraphs), dtype=np.int64, count=len(paragraphs))
    if len(paragraph) and (int(paragraph.max()) >= len(paragraphs) or np.any(end > lengths[paragraph])):
        raise ValueError("a sentence offset lies beyond its paragraph")
    return [paragraphs[p][s:e] for p, s, e in zip(paragraph.tolist(), start.tolist(), end.tolist())]


def shipped_sentences(spans: SentenceSpans, paragraphs: Sequence[str]) -> list[str]:
    """The sentences ``spans`` describe in ``paragraphs``, refused (DataFormatError) unless they are the stored ones."""
    if len(paragraphs) != spans.paragraphs:
        raise DataFormatError(f"{spans.path}: made for {spans.paragraphs} paragraphs, the file has {len(paragraphs)}")
    try:
        sentences = sliced_sentences(paragraphs, spans.paragraph, spans.start, spans.end)
    except ValueError as error:
        raise DataFormatError(f"{spans.path}: {error}") from error
    if _sentences_digest(sentences) != spans.sentences_sha256:
        raise DataFormatError(f"{spans.path}: the sentences its offsets cut differ from the ones it was made from")
    return sentences


def _sentences_digest(sentences: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()


def _compact(values: np.ndarray) -> np.ndarray:
    """``values`` in the smallest unsigned dtype that holds them (the shipped files stay small)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if values.size == 0 or int(values.max()) <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.uint64)
