import numpy as np
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.models import resolve_model_path


def test_the_baseline_is_sentence_transformers_encode(sts_sentences):
    reference = SentenceTransformer(str(resolve_model_path("minilm"))).encode(sts_sentences[:20], batch_size=16)
    method = embedlab.load("st:minilm")
    np.testing.assert_allclose(method.encode(sts_sentences[:20], batch_size=16), reference, atol=1e-6)
    assert method.dimension == 384
    assert method.sentence_transformer is embedlab.load("st:minilm").sentence_transformer  # loaded once per process
