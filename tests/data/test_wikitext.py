"""Tests of embedlab.data.wikitext: the one WikiText-2 reader (detokenising, headings, token-count check)."""

from __future__ import annotations

import pytest

from embedlab.data import DataFormatError
from embedlab.data.wikitext import detokenize, wikitext2_file, wikitext2_paragraphs


def test_detokenize_undoes_wikitext_splitting():
    line = " a role @-@ playing game sold 1 @,@ 000 copies at 3 @.@ 5 dollars by <unk> "
    assert detokenize(line) == "a role-playing game sold 1,000 copies at 3.5 dollars by <unk>"
    assert detokenize(line, unk_token="[UNK]").endswith("by [UNK]")
    # as the masked-LM head's training text reads it (the shipped head was trained on exactly this)
    line = " The role @-@ playing game sold 1 @,@ 000 copies at 3 @.@ 5 dollars , said <unk> . "
    assert detokenize(line, "[UNK]") == "The role-playing game sold 1,000 copies at 3.5 dollars , said [UNK] ."


def test_paragraphs_skip_headings_and_blank_lines():
    paragraphs = wikitext2_paragraphs("valid")
    assert paragraphs and not any(p.startswith("=") and p.endswith("=") for p in paragraphs)
    assert all(p.strip() for p in paragraphs)
    assert "@-@" not in paragraphs[0]


def test_a_truncated_copy_fails_its_token_count(tmp_path, monkeypatch):
    valid = wikitext2_file("valid")
    copy = tmp_path / "corpus" / "wikitext-2" / "valid.txt"
    copy.parent.mkdir(parents=True)
    copy.write_text("\n".join(valid.read_text(encoding="utf-8").split("\n")[:100]) + "\n", encoding="utf-8")
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    with pytest.raises(DataFormatError, match="217646"):
        wikitext2_paragraphs("valid")
    with pytest.raises(ValueError, match="unknown WikiText-2 split"):
        wikitext2_file("dev")


def test_a_file_the_package_has_no_offsets_for_is_split_by_pysbd(tmp_path, monkeypatch, isolated_cache):
    """A WikiText-like valid file of the published token count (blank lines count one token each) but other
    bytes: its hash matches no shipped offsets, so pysbd splits it, once, into a cache file named by its content."""
    import hashlib

    from embedlab.data.sentence_spans import read_sentence_spans, spans_file
    from embedlab.data.wikitext import WIKITEXT_TOKENS, wikitext2_sentences

    lines = [" = A heading = ", " The cat sat on the mat . It was a warm day , said Dr. Smith . ", "",
             " A second paragraph holds one sentence of 3 @.@ 5 words . "]
    tokens = sum(len(line.split()) + 1 for line in lines)
    copy = tmp_path / "corpus" / "wikitext-2" / "valid.txt"
    copy.parent.mkdir(parents=True)
    copy.write_text("\n".join(lines + [""] * (WIKITEXT_TOKENS["valid"] - tokens)) + "\n", encoding="utf-8")
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    sha256 = hashlib.sha256(copy.read_bytes()).hexdigest()
    assert read_sentence_spans(spans_file("valid")).file_sha256 != sha256  # the shipped offsets are for another file
    expected = ["The cat sat on the mat .", "It was a warm day , said Dr. Smith .",
                "A second paragraph holds one sentence of 3.5 words ."]
    assert wikitext2_sentences("valid", min_chars=1) == expected
    cached = isolated_cache / "corpus" / f"wikitext2-valid-sentences-{sha256[:12]}.txt"
    assert cached.read_text(encoding="utf-8").split("\n") == expected
    assert wikitext2_sentences("valid", min_chars=25, unk_token="[UNK]") == expected[1:]
