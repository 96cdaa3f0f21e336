"""The pipeline composed from its stages by hand equals the method a spec names."""

import numpy as np
import pytest

import embedlab
from embedlab.pooling.pipeline import PoolingPipeline, TokenSelection
from embedlab.pooling.postprocess import parse_chain
from embedlab.pooling.sources import ContextualTokens, RandomTokens
from embedlab.pooling.weights import excluded_vocabulary, reference_token_statistics
from tolerance import UNIT_ATOL


def _no_reference():
    raise AssertionError("no step is fitted on the reference corpus")


@pytest.mark.crosspath
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
    np.testing.assert_allclose(vectors, embedlab.load(spec).encode(sts_sentences), atol=UNIT_ATOL)  # stages by hand vs the spec: float32 rounding
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-5)


@pytest.mark.crosspath
def test_static_stages_equal_the_spec(minilm, sts_sentences):
    pipeline = PoolingPipeline(RandomTokens(minilm, seed=3, std=0.2), TokenSelection(weighting="idf-ref"), aggregation="max")
    idf = pipeline.idf(sts_sentences)
    np.testing.assert_array_equal(idf, reference_token_statistics(minilm.tokenizer)[0])
    expected = embedlab.load("random:minilm,seed=3,std=0.2,weights=idf-ref,pool=max").encode(sts_sentences)
    # bit-identical by construction: the spec builds this very pipeline, and table look-ups are summed per text
    np.testing.assert_array_equal(pipeline.pool(sts_sentences, idf), expected)


def test_a_method_is_its_specs_stages(minilm):
    method = embedlab.load("bert+avg:minilm,layers=1,w=0.25,filter=biases,pool=cls,post=whiten@ref")
    pipeline = method.pipeline
    assert pipeline.source.w == 0.25 and pipeline.source.contextual.layers == (1,) and pipeline.source.static_part.layers == (1,)
    assert pipeline.selection.include_special and pipeline.selection.weighting == "none"
    np.testing.assert_array_equal(pipeline.selection.excluded_vocab, excluded_vocabulary(minilm.tokenizer, "frequent+punct+subword"))
    assert pipeline.aggregation == "cls" and pipeline.post == (("whiten", True),)


def test_an_unknown_weighting_is_refused():
    with pytest.raises(ValueError, match="unknown token weighting"):
        TokenSelection(weighting="bm25")


# --- streaming: chunk by chunk equals one pass ------------------------------------------------

def _long_text() -> str:
    words = "The committee reviewed the proposal and approved a revised budget for the coming year".split()
    return " ".join(" ".join(words[i % 5 :]) + f" number {i}." for i in range(120))  # several model inputs


@pytest.mark.parametrize("spec", [
    "minilm:layers=1+last,weights=idf-target,post=zscore+normalize,template=T2",
    "minilm:pool=max,special=exclude",
    "minilm:pool=cls,filter=biases",
])
@pytest.mark.crosspath
def test_streamed_pooling_equals_one_pass(spec, sts_sentences, tmp_path, wikitext_caches):
    """Chunks of a few texts equal one pass over the same token states (idf^T, the fitted chain, a template
    and a long text's model inputs all take part); the method streams the same way. From an empty cache
    the streamed run feeds the model other batches, which moves token states by float rounding only."""
    from embedlab.pooling.pipeline import stream_chunks
    from embedlab.runtime.settings import configure

    texts = sts_sentences[:25] + [_long_text()] + sts_sentences[25:40]
    assert len(list(stream_chunks(texts, 120))) >= 8
    for root in ("shared", "empty"):  # no token states; the WikiText-2 statistics filter=biases reads are given
        wikitext_caches(tmp_path / root)
    try:
        configure(cache_root=tmp_path / "shared", memory_cache_bytes=0)  # chunks re-read the disk cache
        pipeline = embedlab.load(spec).pipeline
        idf = pipeline.idf(texts)
        once = pipeline.pool(texts, idf, chunk_characters=10**9)
        streamed = pipeline.pool(texts, idf, chunk_characters=120)
        # the same token states summed chunk by chunk vs at once: float32 rounding (unit-scale vectors)
        np.testing.assert_allclose(streamed, once, atol=UNIT_ATOL, rtol=0)
        vectors = pipeline.fit_post(streamed, _no_reference)[1]
        np.testing.assert_allclose(vectors, pipeline.fit_post(once, _no_reference)[1], atol=UNIT_ATOL, rtol=0)
        np.testing.assert_allclose(embedlab.load(spec).encode(texts), vectors, atol=UNIT_ATOL, rtol=0)

        configure(cache_root=tmp_path / "empty")
        np.testing.assert_allclose(embedlab.load(spec).pipeline.pool(texts, idf, chunk_characters=120), once, atol=UNIT_ATOL, rtol=0)
    finally:
        configure()


class _RejectsBad(RandomTokens):
    """Random token vectors that refuse the text "bad", naming its index in the list given, as sources do."""

    def token_vectors(self, texts, batch_size, show_progress_bar):
        if "bad" in texts:
            raise ValueError(f"text at index {texts.index('bad')} is bad")
        return super().token_vectors(texts, batch_size, show_progress_bar)


def test_a_streamed_error_names_the_text_of_the_whole_call(minilm):
    # pool=max: static sources with mean pooling take the fast path, which streams nothing
    pipeline = PoolingPipeline(_RejectsBad(minilm), TokenSelection(), aggregation="max")
    texts = ["one", "two", "three", "four", "bad", "six"]
    assert pipeline.pool(texts[:4], None, chunk_characters=4).shape == (4, minilm.hidden_size)
    with pytest.raises(ValueError, match="text at index 4 is bad"):
        pipeline.pool(texts, None, chunk_characters=4)  # chunks of one or two texts


@pytest.mark.parametrize("spec", [
    "random:minilm", "random:minilm,seed=2,special=exclude,weights=idf-target", "random:minilm,filter=biases,weights=idf-ref",
    "avg:minilm,layers=1", "avg:minilm,layers=0+last,special=exclude,weights=idf-target,filter=punct",
])
@pytest.mark.crosspath
def test_the_static_fast_path_equals_the_general_path(minilm, sts_sentences, monkeypatch, spec):
    """One sparse product with the table = gathering (T, d) token vectors and aggregating them."""
    from embedlab.pooling import sources
    from embedlab.pooling.aggregation import aggregate, select_tokens, token_weights

    tables = np.random.default_rng(0).normal(size=(minilm.num_layers + 2, len(minilm.tokenizer), 16)).astype(np.float32)
    monkeypatch.setattr(sources, "avg_tables", lambda model, show_progress_bar=None: tables)
    texts = [*sts_sentences, "an [UNK] and \u2603"]
    pipeline = embedlab.load(spec).pipeline
    assert pipeline.static_fast_path
    idf = pipeline.idf(texts)
    flat, matrix = pipeline.source.token_vectors(texts, 32, False)
    keep = select_tokens(flat, pipeline.selection.include_special, pipeline.selection.excluded_vocab)
    general = aggregate(matrix, flat, token_weights(flat, keep, idf), keep, "mean")
    # the fast path vs the general aggregation, at once and chunked: float32 rounding (unit-scale vectors)
    np.testing.assert_allclose(pipeline.pool(texts, idf), general, rtol=0, atol=UNIT_ATOL)
    np.testing.assert_allclose(pipeline.pool(texts, idf, chunk_characters=200), general, rtol=0, atol=UNIT_ATOL)
