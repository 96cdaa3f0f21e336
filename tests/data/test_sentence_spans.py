"""Tests of embedlab.data.sentence_spans: the shipped WikiText-2 sentence offsets give pysbd's split, and a
damaged or mismatched offset file is refused, never used."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from embedlab.data import DataFormatError
from embedlab.data import wikitext as wikitext_module
from embedlab.data.sentence_spans import read_sentence_spans, sliced_sentences, spans_file, write_sentence_spans
from embedlab.data.sentences import split_sentences_of_texts
from embedlab.data.wikitext import WIKITEXT_SPLITS, wikitext2_file, wikitext2_paragraphs, wikitext2_sentences


def test_the_shipped_train_offsets_cut_pysbds_sentences_at_both_ends_of_the_file():
    """The first and the last 150 paragraphs of train (pysbd on 147,000 characters, not 10.9 M): an offset
    file that is shifted, truncated or made from other paragraphs gives other sentences here."""
    paragraphs = wikitext2_paragraphs("train")
    spans = read_sentence_spans(spans_file("train"))
    assert spans.file_sha256 == hashlib.sha256(wikitext2_file("train").read_bytes()).hexdigest()
    assert spans.paragraphs == len(paragraphs) == 17556
    for first in (0, len(paragraphs) - 150):
        kept = (spans.paragraph >= first) & (spans.paragraph < first + 150)
        sliced = sliced_sentences(paragraphs[first:first + 150], spans.paragraph[kept] - first, spans.start[kept],
                                  spans.end[kept])
        pysbd = split_sentences_of_texts(paragraphs[first:first + 150], processes=1)
        assert sliced == pysbd
        assert len(pysbd) > 300  # several sentences a paragraph: order and boundaries are both checked


def test_every_split_has_offsets_for_the_shared_file_in_compact_dtypes():
    for split in WIKITEXT_SPLITS:
        spans = read_sentence_spans(spans_file(split))
        assert spans.file_sha256 == hashlib.sha256(wikitext2_file(split).read_bytes()).hexdigest(), split
        assert {spans.paragraph.dtype, spans.start.dtype, spans.end.dtype} == {np.dtype(np.uint16)}, split


def damaged_copy(tmp_path, monkeypatch, split: str = "valid", **changes) -> None:
    """Install a copy of ``split``'s shipped offsets with ``changes`` (field -> new array) as the shipped file."""
    with np.load(spans_file(split), allow_pickle=False) as stored:
        fields = {name: stored[name] for name in stored.files}
    fields.update(changes)
    np.savez_compressed(spans_file("valid", tmp_path), **fields)
    monkeypatch.setattr(wikitext_module, "spans_file", lambda split: spans_file(split, tmp_path))


def test_offsets_shifted_by_one_character_are_refused(tmp_path, monkeypatch, isolated_cache):
    with np.load(spans_file("valid"), allow_pickle=False) as stored:
        start = stored["start"].copy()
    start[100] += 1  # still a non-empty slice inside its paragraph: only the sentences' digest can tell
    damaged_copy(tmp_path, monkeypatch, start=start)
    with pytest.raises(DataFormatError, match=r"wikitext2-valid-sentence-spans\.npz: the sentences its offsets cut differ"):
        wikitext2_sentences("valid")
    assert not list(isolated_cache.rglob("wikitext2-*")), "a refused offset file must not fall back to a cache"


def test_another_splits_offsets_under_this_files_hash_are_refused(tmp_path, monkeypatch, isolated_cache):
    with np.load(spans_file("valid"), allow_pickle=False) as stored:
        valid_sha256 = stored["file_sha256"]
    with np.load(spans_file("test"), allow_pickle=False) as stored:
        test_fields = {name: stored[name] for name in stored.files}
    damaged_copy(tmp_path, monkeypatch, **{**test_fields, "file_sha256": valid_sha256})
    with pytest.raises(DataFormatError, match="made for 2185 paragraphs, the file has 1841"):
        wikitext2_sentences("valid")
    damaged_copy(tmp_path, monkeypatch, **{**test_fields, "file_sha256": valid_sha256, "paragraphs": np.array(1841)})
    with pytest.raises(DataFormatError, match="beyond its paragraph|differ"):
        wikitext2_sentences("valid")


@pytest.mark.parametrize("change, message", [
    ({"end": np.zeros(7487, dtype=np.uint16)}, "empty or ends before it starts"),
    ({"start": np.zeros(7487, dtype=np.float32)}, "unsigned integer vectors of one length"),
    ({"paragraph": np.zeros(3, dtype=np.uint16)}, "unsigned integer vectors of one length"),
    ({"extra": np.zeros(1)}, "expected"),
])
def test_malformed_offset_files_are_refused(tmp_path, monkeypatch, change, message):
    damaged_copy(tmp_path, monkeypatch, **change)
    with pytest.raises(DataFormatError, match=message):
        wikitext2_sentences("valid")


def test_an_unreadable_offset_file_is_refused(tmp_path, monkeypatch):
    spans_file("valid", tmp_path).write_bytes(b"PK\x03\x04 not really a zip archive")
    monkeypatch.setattr(wikitext_module, "spans_file", lambda split: spans_file(split, tmp_path))
    with pytest.raises(DataFormatError, match="not a readable sentence-offset file"):
        wikitext2_sentences("valid")


def test_written_offsets_round_trip_and_a_foreign_sentence_is_rejected(tmp_path):
    paragraphs = ["It rained. It rained.", "Go. Go now.", "One."]
    sentences = [["It rained.", "It rained."], ["Go.", "Go now."], ["One."]]
    write_sentence_spans(tmp_path / "spans.npz", "0" * 64, paragraphs, sentences)
    spans = read_sentence_spans(tmp_path / "spans.npz")
    # hand-computed offsets: the repeated sentence is found after the first one, not at it again
    assert spans.paragraph.tolist() == [0, 0, 1, 1, 2]
    assert spans.start.tolist() == [0, 11, 0, 4, 0] and spans.end.tolist() == [10, 21, 3, 11, 4]
    assert sliced_sentences(paragraphs, spans.paragraph, spans.start, spans.end) == [s for group in sentences for s in group]
    with pytest.raises(ValueError, match="paragraph 1: sentence 'Stop.' is not a substring"):
        write_sentence_spans(tmp_path / "bad.npz", "0" * 64, paragraphs, [["It rained."], ["Stop."], []])
