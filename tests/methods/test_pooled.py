import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.methods import pooled
from embedlab.methods.pooled import PooledMethod
from embedlab.models.loading import load_model, resolve_model_path
from embedlab.registry import parse
from tolerance import COSINE_FLOOR, UNIT_ATOL


@pytest.mark.crosspath
def test_minilm_equals_sentence_transformers(sts_sentences):
    ours = embedlab.load("minilm").encode(sts_sentences, batch_size=16, normalize_embeddings=True)
    reference = SentenceTransformer(str(resolve_model_path("minilm"))).encode(sts_sentences, batch_size=16)
    assert ours.dtype == np.float32 and ours.shape == (len(sts_sentences), 384)
    assert np.einsum("ij,ij->i", ours, reference).min() >= COSINE_FLOOR  # the same unit vectors up to float32 rounding


@pytest.mark.crosspath
def test_truncate_equals_sentence_transformers_max_seq_length_on_summeval_articles():
    """``truncate=256`` is sentence-transformers' own protocol (``max_seq_length=256``: each input cut at
    256 tokens) on real SummEval articles, which are longer than that; without it the articles are pooled
    whole (chunked), which is visibly another vector."""
    from embedlab.data.summeval import summeval

    articles = sorted({item.article for item in summeval()}, key=len)[-3:]
    minilm = load_model("minilm")
    assert all(len(minilm.tokenizer(article)["input_ids"]) > 300 for article in articles)
    reference = SentenceTransformer(str(resolve_model_path("minilm")))
    reference.max_seq_length = 256
    expected = reference.encode(articles, batch_size=4)
    cut = embedlab.load("minilm:truncate=256,post=normalize").encode(articles, batch_size=4)
    assert np.abs(cut - expected).max() <= UNIT_ATOL  # embedlab's pooling vs sentence-transformers' (unit vectors)
    whole = embedlab.load("minilm:post=normalize").encode(articles, batch_size=4)
    assert np.abs(whole - expected).max() > 1e-2


def test_truncate_beyond_the_model_input_fails_when_the_method_is_built():
    with pytest.raises(ValueError, match="truncate=300: .* takes at most 256 input tokens"):
        embedlab.load("minilm:truncate=300")


@pytest.mark.crosspath
def test_reruns_are_identical(sts_sentences):
    spec = "minilm:layers=1+last,weights=idf-target,post=zscore+normalize"
    first = embedlab.load(spec).encode(sts_sentences)
    second = embedlab.load(spec).encode(sts_sentences)
    # bit-identical by construction: the same call twice in one process (same batches, kernels, threads)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(embedlab.load("random:minilm").encode(sts_sentences), embedlab.load("random:minilm").encode(sts_sentences))


def test_bad_input_is_reported():
    method = embedlab.load("minilm")
    assert method.encode([]).shape == (0, 384)
    with pytest.raises(TypeError, match="text at index 2 is int"):
        method.encode(["a", "b", 3])
    assert method.encode("a text").shape == (384,)  # one string gives one vector, as in sentence-transformers


@pytest.mark.crosspath
def test_empty_text_is_the_embedding_of_the_special_tokens(minilm):
    import torch

    ids = torch.tensor([[minilm.tokenizer.cls_token_id, minilm.tokenizer.sep_token_id]], device=minilm.device)
    with torch.inference_mode():
        expected = minilm.model(input_ids=ids).last_hidden_state[0].mean(0).cpu().numpy()
    vectors = embedlab.load("minilm").encode(["", "   "])
    # plain transformers' forward vs embedlab's batched token states: float32 rounding
    np.testing.assert_allclose(vectors[0], expected, atol=UNIT_ATOL)
    np.testing.assert_allclose(vectors[1], expected, atol=UNIT_ATOL)


@pytest.mark.crosspath
def test_idf_target_weights_and_fit_then_encode(sts_sentences):
    method = embedlab.load("minilm:weights=idf-target,post=zscore")
    transductive = method.encode(sts_sentences)
    fitted = embedlab.load("minilm:weights=idf-target,post=zscore").fit(sts_sentences)
    np.testing.assert_allclose(fitted.encode(sts_sentences), transductive, atol=UNIT_ATOL)  # fitted apart vs in the call: float32 rounding
    # a fitted method encodes new texts with the statistics of the fitting texts
    one = fitted.encode(sts_sentences[:1])
    np.testing.assert_allclose(one[0], transductive[0], atol=UNIT_ATOL)  # alone vs in a batch


def test_layer_and_template_options_change_the_vectors(sts_sentences):
    base = embedlab.load("minilm").encode(sts_sentences[:6])
    for spec in ("minilm:layers=1+last", "minilm:template=T0,pool=mask", "minilm:pool=cls", "minilm:filter=punct+subword", "minilm:special=exclude"):
        other = embedlab.load(spec).encode(sts_sentences[:6])
        assert other.shape == base.shape and not np.allclose(other, base)


def test_reference_fitted_post_processing(monkeypatch, sts_sentences):
    monkeypatch.setattr(pooled, "REFERENCE_SENTENCES", 300)
    method = embedlab.load("minilm:post=zscore@ref")
    reference = method.reference_vectors(None)
    assert reference.shape == (300, 384)
    reference = reference.astype(np.float64)
    std = reference.std(0)
    # all-MiniLM-L6-v2 has features stuck near 1e-32: z-scoring only centres such negligible features
    expected = (method.pipeline.pool(sts_sentences, None) - reference.mean(0)) / np.where(std > 1e-7 * std.max(), std, 1)
    np.testing.assert_allclose(method.encode(sts_sentences), expected, rtol=1e-3, atol=1e-3)


@pytest.mark.crosspath
def test_similarity_is_the_cosine(sts_sentences):
    method = embedlab.load("minilm")
    pairs = [(sts_sentences[0], sts_sentences[1]), (sts_sentences[2], sts_sentences[3])]
    vectors = method.encode(sts_sentences[:4], normalize_embeddings=True)
    np.testing.assert_allclose(method.similarity_pairs(pairs), [vectors[0] @ vectors[1], vectors[2] @ vectors[3]], atol=UNIT_ATOL)  # other batches


@pytest.mark.crosspath
def test_fitted_statistics_are_saved_and_restored_without_pickle(sts_sentences, tmp_path):
    spec = "minilm:weights=idf-target,post=zscore+abtt-2+normalize"
    fitted = embedlab.load(spec).fit(sts_sentences)
    fitted.save_fitted(str(tmp_path / "fitted.safetensors"))
    restored = embedlab.load(spec).load_fitted(str(tmp_path / "fitted.safetensors"))
    # bit-identical by construction: float32 statistics stored exactly, then the same call on the same texts
    np.testing.assert_array_equal(restored.encode(sts_sentences[:5]), fitted.encode(sts_sentences[:5]))
    assert restored.fingerprint == fitted.fingerprint
    with pytest.raises(ValueError, match="holds statistics of"):
        embedlab.load("minilm:post=zscore").load_fitted(str(tmp_path / "fitted.safetensors"))
    with pytest.raises(RuntimeError, match="call fit"):
        embedlab.load(spec).save_fitted(str(tmp_path / "unfitted.safetensors"))


def test_constructing_a_method_does_no_work():
    method = PooledMethod(parse("minilm:weights=idf-target,post=zscore"))
    assert "pipeline" not in vars(method) and not method.is_fitted
    assert not hasattr(method, "idf_") and not hasattr(method, "chain_")


def test_fitted_state_is_part_of_the_fingerprint(sts_sentences, minilm):
    spec = "minilm:weights=idf-target,post=zscore"
    first, second = sts_sentences[:30], sts_sentences[30:]
    unfitted = embedlab.load(spec)
    fitted_a = embedlab.load(spec).fit(first)
    fitted_a_again = embedlab.load(spec).fit(first)
    fitted_b = embedlab.load(spec).fit(second)
    assert unfitted.fingerprint == minilm.fingerprint
    assert fitted_a.fingerprint.startswith(minilm.fingerprint + "-fit-")
    assert fitted_a.fingerprint == fitted_a_again.fingerprint
    assert len({unfitted.fingerprint, fitted_a.fingerprint, fitted_b.fingerprint}) == 3
    assert fitted_a.idf_ is not None and fitted_a.chain_.steps[0].name == "zscore"
    # encoding with a fitted method does not change what it was fitted on
    fitted_a.encode(second)
    assert fitted_a.fingerprint == fitted_a_again.fingerprint


def test_target_fitted_statistics_refuse_fewer_texts_than_they_need(capsys):
    """z-score on one pair gave −1.0 for a paraphrase, quantile-u 0.0: the statistics were the count's. Each
    statistic's documented minimum: 10 for idf^T, z-score, quantiles, ABTT-D (or D + 2); whitening more texts
    than dimensions (384 + 1); none for @ref steps and normalize."""
    from embedlab.cli.app import main
    from embedlab.errors import InputError

    pair = [("A man plays a guitar.", "A man is playing a guitar.")]
    minimums = {"post=zscore": (10, "post=zscore"), "weights=idf-target": (10, "weights=idf-target"),
                "post=quantile-u": (10, "post=quantile-u"), "post=whiten": (385, "post=whiten"),
                "post=abtt-20": (22, "post=abtt-20"), "post=zscore+whiten@ref": (10, "post=zscore"),
                "post=whiten@ref+normalize": (0, "")}
    for options, expected in minimums.items():
        method = embedlab.load(f"random:minilm,{options}")
        assert method.pipeline.target_minimum() == expected
        if expected[0]:
            with pytest.raises(InputError, match=rf"{expected[1]} is fitted on the texts being encoded and needs at least "
                                                 rf"{expected[0]} of them; this call has 2 distinct\..*fit\(texts\).*@ref.*whiten-ref"):
                method.similarity_pairs(pair)
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(12)]
    zscore = embedlab.load("random:minilm,post=zscore")
    assert zscore.encode(texts).shape == (12, 384)  # enough texts: fitted on them, as before
    fitted = embedlab.load("random:minilm,post=zscore").fit(texts)
    assert fitted.similarity_pairs(pair).shape == (1,)  # fitted once: any number of texts after
    assert main(["similarity", "random:minilm,post=quantile-u", *pair[0]]) == 2
    assert "post=quantile-u is fitted on the texts being encoded and needs at least 10" in capsys.readouterr().err
