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
