"""The pipeline composed from its stages by hand equals the method a spec names."""

import numpy as np
import pytest

import embedlab
from embedlab.pooling.pipeline import PoolingPipeline, TokenSelection
from embedlab.pooling.postprocess import parse_chain
from embedlab.pooling.sources import ContextualTokens, RandomTokens
from embedlab.pooling.weights import excluded_vocabulary, reference_token_statistics


def _no_reference():
    raise AssertionError("no step is fitted on the reference corpus")


def test_contextual_stages_equal_the_spec(minilm, sts_sentences):
    spec = "minilm:layers=1+last,special=exclude,filter=punct,weights=idf-target,post=zscore+normalize"
    pipeline = PoolingPipeline(
        source=ContextualTokens(minilm, (1, 6)),
        selection=TokenSelection(include_special=False, excluded_vocab=excluded_vocabulary(minilm.tokenizer, "punct"), weighting="idf-target"),
        aggregation="mean",
        post=tuple(parse_chain("zscore+normalize")),
    )
    idf = pipeline.idf(sts_sentences)
    _, vectors = pipeline.fit_post(pipeline.pool(sts_sentences, idf), _no_reference)
    np.testing.assert_allclose(vectors, embedlab.load(spec).encode(sts_sentences), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-5)


def test_static_stages_equal_the_spec(minilm, sts_sentences):
    pipeline = PoolingPipeline(RandomTokens(minilm, seed=3, std=0.2), TokenSelection(weighting="idf-ref"), aggregation="max")
    idf = pipeline.idf(sts_sentences)
    np.testing.assert_array_equal(idf, reference_token_statistics(minilm.tokenizer)[0])
    expected = embedlab.load("random:minilm,seed=3,std=0.2,weights=idf-ref,pool=max").encode(sts_sentences)
    np.testing.assert_allclose(pipeline.pool(sts_sentences, idf), expected, atol=1e-7)


def test_a_method_is_its_specs_stages(minilm):
    method = embedlab.load("bert+avg:minilm,layers=1,w=0.25,filter=biases,pool=cls,post=whiten@ref")
    pipeline = method.pipeline
    assert pipeline.source.w == 0.25 and pipeline.source.contextual.layers == (1,) and pipeline.source.static.layers == (1,)
    assert pipeline.selection.include_special and pipeline.selection.weighting == "none"
    np.testing.assert_array_equal(pipeline.selection.excluded_vocab, excluded_vocabulary(minilm.tokenizer, "frequent+punct+subword"))
    assert pipeline.aggregation == "cls" and pipeline.post == (("whiten", True),)


def test_an_unknown_weighting_is_refused():
    with pytest.raises(ValueError, match="unknown token weighting"):
        TokenSelection(weighting="bm25")
