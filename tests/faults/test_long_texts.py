"""Long texts in linear time: sentence splitting never hands pysbd (quadratic in its input) more than a
bounded window, so a text of any length splits in time linear in its length, and an ordinary text gets
the sentences (and so the chunks) that one pysbd call on the whole text gives."""

from __future__ import annotations

import pytest

from embedlab.data import sentences
from embedlab.data.sentences import chunk_token_ids, split_sentences

BOUND = 8192  # the most characters pysbd may see at once


@pytest.fixture
def seen(monkeypatch):
    """Every input length the segmenter was given."""
    lengths: list[int] = []
    segmenter = sentences._segmenter()
    real = segmenter.segment

    class Recording:
        def segment(self, text):
            lengths.append(len(text))
            return real(text)

    monkeypatch.setattr(sentences, "_segmenter", lambda: Recording())
    return lengths


@pytest.mark.parametrize("text", [
    "A man is playing a guitar. " * 8000,             # 216,000 characters of short sentences
    "word " * 60_000,                                 # 300,000 characters, no sentence end at all
    "Dr. Smith went to Washington, D.C. on Jan. 3. He stayed! Why? " * 3000,
])
def test_a_long_text_is_segmented_in_bounded_windows(seen, text):
    pieces = split_sentences(text)
    assert max(seen) <= BOUND
    assert sum(seen) <= 2 * len(text)  # linear: every character is segmented at most about twice
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")  # nothing dropped, nothing repeated


def _ordinary_texts(sts_test_rows):
    """Prose of 13,000 to 40,000 characters: STS-B test sentences (news, captions, forums) in three orders.

    Sentences with a double quote are left out: after an unmatched one pysbd makes the rest of its input
    one "sentence" (a 40,000-character one on a whole text); windows bound that to one window, so such a
    text is split differently from today, on purpose."""
    unique = list(dict.fromkeys(text for _, a, b in sts_test_rows for text in (a, b) if '"' not in text))
    return [" ".join(unique[:400]), " ".join(unique[400:1000][::-1]), " ".join(unique[1000:2400:2])]


def test_ordinary_long_texts_get_the_sentences_and_chunks_of_today(sts_test_rows, minilm):
    whole_text_segmenter = sentences._segmenter()
    tokenize = lambda text: list(minilm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])  # noqa: E731
    for text in _ordinary_texts(sts_test_rows):
        assert len(text) > 3 * 4096, len(text)
        today = [piece.strip() for piece in whole_text_segmenter.segment(text) if piece.strip()]
        assert split_sentences(text) == today
        chunks_today = sentences.pack_sentences([tokenize(sentence) for sentence in today], 254)
        assert chunk_token_ids(text, tokenize, 254) == chunks_today
