import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.models.loading import resolve_model_path
from tolerance import UNIT_ATOL


@pytest.mark.crosspath
def test_the_baseline_is_sentence_transformers_encode(sts_sentences):
    reference = SentenceTransformer(str(resolve_model_path("minilm"))).encode(sts_sentences[:20], batch_size=16)
    method = embedlab.load("st:minilm")
    # sentence-transformers' encode in two instances of the model, the same batches: float32 rounding at most
    np.testing.assert_allclose(method.encode(sts_sentences[:20], batch_size=16), reference, atol=UNIT_ATOL)
    assert method.dimension == 384
    assert method.sentence_transformer is embedlab.load("st:minilm").sentence_transformer  # loaded once per process


@pytest.mark.crosspath
def test_st_minilm_is_minilm_post_normalize(sts_sentences):
    """all-MiniLM-L6-v2's sentence-transformers pipeline is mean pooling then Normalize, so the baseline
    equals the pooled method with post=normalize element by element (not only in direction)."""
    baseline = embedlab.load("st:minilm").encode(sts_sentences, batch_size=16)
    pooled = embedlab.load("minilm:post=normalize").encode(sts_sentences, batch_size=16)
    assert np.abs(baseline - pooled).max() <= UNIT_ATOL  # two implementations of mean + normalize: float32 rounding
    raw = embedlab.load("minilm").encode(sts_sentences, batch_size=16)
    assert np.abs(np.linalg.norm(raw, axis=1) - 1).max() > 0.1  # plain minilm is the raw, unnormalised mean
