import numpy as np
import pytest

import embedlab


@pytest.mark.crosspath
def test_concatenation_is_unit_norm_and_ordered(sts_sentences):
    both = embedlab.load("minilm+random:minilm")
    vectors = both.encode(sts_sentences[:4])
    assert vectors.shape == (4, 768) and both.dimension == 768
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-5)
    first = embedlab.load("minilm").encode(sts_sentences[:4], normalize_embeddings=True)
    second = embedlab.load("random:minilm").encode(sts_sentences[:4], normalize_embeddings=True)
    np.testing.assert_allclose(vectors * np.sqrt(2), np.hstack([first, second]), atol=1e-5)


def test_fingerprint_joins_the_parts():
    method = embedlab.load("minilm+st:minilm")
    assert method.fingerprint == "+".join(part.fingerprint for part in method.parts)


def test_pairwise_methods_cannot_be_concatenated():
    with pytest.raises(ValueError, match="cannot concatenate the pairwise method"):
        embedlab.load("minilm+match:minilm")
