from embedlab.data.wikitext import detokenize, wikitext2_paragraphs


def test_detokenize_undoes_wikitext_splitting():
    line = " a role @-@ playing game sold 1 @,@ 000 copies at 3 @.@ 5 dollars by <unk> "
    assert detokenize(line) == "a role-playing game sold 1,000 copies at 3.5 dollars by <unk>"
    assert detokenize(line, unk_token="[UNK]").endswith("by [UNK]")


def test_paragraphs_skip_headings_and_blank_lines():
    paragraphs = wikitext2_paragraphs("valid")
    assert paragraphs and not any(p.startswith("=") and p.endswith("=") for p in paragraphs)
    assert all(p.strip() for p in paragraphs)
    assert "@-@" not in paragraphs[0]
