"""One huge text is pooled a group of chunks at a time (``embedlab.pooling.long_texts``): its token states
are never all held, and its vector equals the whole-text path's to 1e-6 for every aggregation. The
thresholds are lowered here so that a text of a few thousand characters takes the streamed path; the
benchmark (benchmarks/bench_long_text.py) measures the memory at 2,000,000 characters."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.pooling import long_texts
from embedlab.runtime.settings import token_states_uncached
from embedlab.tokens import store
from tolerance import UNIT_ATOL


@pytest.fixture(scope="module")
def long_text(sts_sentences) -> str:
    text = " ".join(sts_sentences * 2)  # about 3,500 characters: 4 chunks of MiniLM's 256 tokens
    assert len(text) > 3_000
    return text


@pytest.mark.parametrize("spec", [
    "minilm",
    "minilm:pool=max",
    "minilm:layers=0+3+last,filter=punct,special=exclude",
    "minilm:template=T0,pool=mask",
])
@pytest.mark.crosspath
def test_a_long_text_streams_and_equals_the_whole_text_path(monkeypatch, long_text, sts_sentences, spec):
    method = embedlab.load(spec)
    monkeypatch.setattr(long_texts, "LONG_TEXT_CHARACTERS", 10 ** 9)
    with token_states_uncached():  # fresh states on both paths, in the same batches
        whole = method.encode([long_text], batch_size=2)
        mixed_whole = method.encode([sts_sentences[0], long_text, sts_sentences[1]], batch_size=2)
    monkeypatch.setattr(long_texts, "LONG_TEXT_CHARACTERS", 2_000)
    groups: list[int] = []
    run = long_texts.run_sequences

    def counted(model, sequences, *args, **kwargs):
        groups.append(len(sequences))
        yield from run(model, sequences, *args, **kwargs)

    compute = store.TokenStateStore.compute

    def refuse_long(self, texts, *args, **kwargs):
        assert all(len(text) <= 2_000 for text in texts), "the long text went through the whole-text path"
        return compute(self, texts, *args, **kwargs)

    monkeypatch.setattr(long_texts, "run_sequences", counted)
    monkeypatch.setattr(store.TokenStateStore, "compute", refuse_long)
    with token_states_uncached():
        streamed = method.encode([long_text], batch_size=2)
        mixed = method.encode([sts_sentences[0], long_text, sts_sentences[1]], batch_size=2)
    assert groups[0] >= 4  # the long text's chunks, folded in as each batch of two completes
    assert streamed.dtype == np.float32 and streamed.shape == whole.shape == (1, 384)
    # chunks folded in batch by batch vs pooled at once: the same states summed in another order, float32 rounding
    np.testing.assert_allclose(streamed, whole, atol=UNIT_ATOL, rtol=0)
    # among other texts: each vector in its place (the short texts' batches differ: float32 rounding)
    np.testing.assert_allclose(mixed, mixed_whole, atol=UNIT_ATOL, rtol=0)
    np.testing.assert_allclose(mixed[1], streamed[0], atol=UNIT_ATOL, rtol=0)
