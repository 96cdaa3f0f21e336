"""Output precision and width (``precision=``, ``truncate_dim=``) as sentence-transformers gives them, the
compute options of the transformer families, and the identities both leave alone or change."""

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer, quantize_embeddings

import embedlab
from embedlab.errors import InputError
from embedlab.methods.base import unit_rows
from embedlab.methods.precision import comparable
from embedlab.models.loading import load_model, resolve_model_path
from embedlab.spec import SpecError
from embedlab.tokens.store import store_for

TEXTS = ["A man plays a guitar.", "Someone plays an instrument.", "A cat sleeps on the sofa.",
         "The stock market fell sharply today.", "Two dogs run across a field.", "A woman slices an onion."]


@pytest.mark.parametrize("precision", ["int8", "ubinary"])  # the other two are offsets of these (below)
@pytest.mark.crosspath
def test_encode_equals_sentence_transformers_bit_for_bit(precision):
    """``st:minilm`` through embedlab's encode, and the same model through sentence-transformers' own encode,
    with the same truncation and quantisation: the same bytes. (Normalising is numpy's here and torch's
    there, which can differ in the last bit: that path is checked against quantize_embeddings below.)"""
    ours = embedlab.load("st:minilm").encode(TEXTS, precision=precision, truncate_dim=128)
    theirs = SentenceTransformer(str(resolve_model_path("minilm"))).encode(TEXTS, precision=precision, truncate_dim=128)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_spec_options_equal_quantize_embeddings_and_an_argument_overrides_them(precision):
    method = embedlab.load(f"random:minilm,precision={precision},truncate_dim=64")
    floats = embedlab.load("random:minilm").encode(TEXTS)
    expected = quantize_embeddings(floats[:, :64], precision=precision)  # ranges from the encoded texts, as there
    np.testing.assert_array_equal(method.encode(TEXTS), expected)
    normalised = quantize_embeddings(unit_rows(floats[:, :64]), precision=precision)  # cut, then normalise, then quantise
    np.testing.assert_array_equal(method.encode(TEXTS, normalize_embeddings=True), normalised)
    np.testing.assert_array_equal(method.encode(TEXTS, precision="float32", truncate_dim=384), floats)


def test_binary_vectors_compare_as_hamming_distance():
    bits = np.array([[0b11110000], [0b11000000]], dtype=np.uint8)  # 2 of 8 bits differ
    rows = comparable(bits, "ubinary")
    assert float(rows[0] @ rows[1]) / 8 == pytest.approx(1 - 2 * 2 / 8)  # cosine of ±1 vectors = 1 − 2·Hamming/d
    np.testing.assert_array_equal(comparable((bits.astype(np.int16) - 128).astype(np.int8), "binary"), rows)
    method = embedlab.load("random:minilm,precision=ubinary")
    packed = method.encode(TEXTS[:2])
    signs = np.where(embedlab.load("random:minilm").encode(TEXTS[:2]) > 0, 1.0, -1.0)
    np.testing.assert_allclose(method.similarity(packed[0], packed[1]).item(), signs[0] @ signs[1] / 384, atol=1e-6)
    np.testing.assert_allclose(method.similarity_pairs([(TEXTS[0], TEXTS[1])]), [signs[0] @ signs[1] / 384], atol=1e-6)


@pytest.mark.parametrize(("spec", "message"), [
    ("minilm:precision=binary,truncate_dim=100", "100 is not a multiple of 8"),
    ("minilm:truncate_dim=1000", "larger than the vectors' width 384"),
    ("minilm:truncate_dim=0", "at least 1"),
    ("minilm:dtype=bf16,quantize=int8", "choose one"),
    ("st:minilm,dtype=fp16,quantize=int8", "choose one"),
    ("random:minilm,dtype=bf16", "unknown option 'dtype' for family 'random'"),
    ("minilm+random:minilm,precision=ubinary", "not to a part of a concatenation"),
])
def test_bad_precision_options_fail_when_the_spec_is_read(spec, message):
    with pytest.raises(InputError, match=message):
        embedlab.load(spec)


@pytest.mark.parametrize(("keywords", "message"), [
    ({"truncate_dim": 0}, "positive whole number"), ({"truncate_dim": "8"}, "positive whole number"),
    ({"truncate_dim": 385}, "larger than the vectors' width 384"), ({"precision": "binary", "truncate_dim": 12}, "multiple of 8"),
])
def test_bad_encode_arguments_are_refused(keywords, message):
    with pytest.raises(InputError, match=message):
        embedlab.load("random:minilm").encode(TEXTS, **keywords)


def test_one_text_has_no_int8_ranges():
    with pytest.raises(InputError, match="one text has none"):
        embedlab.load("random:minilm").encode("a single text", precision="int8")
    assert embedlab.load("random:minilm").encode("a single text", precision="ubinary").shape == (48,)


def test_fp32_identities_are_those_of_before_precision_existed(minilm):
    """Pinned values computed before the compute options existed (commit 381966f): fp32 keys do not move."""
    assert minilm.fingerprint == "fcf7cd7986f4b540"
    assert store_for(minilm).key("A man plays a guitar.", None, 6) == "4c656ed493a85cd447fad8fa9cb52928b6cef7029973648322c48842cd9f6119"
    for spec, fingerprint in [("minilm", "fcf7cd7986f4b540"), ("st:minilm", "fcf7cd7986f4b540"),
                              ("minilm:dtype=fp32,precision=float32", "fcf7cd7986f4b540"), ("match:minilm", "fcf7cd7986f4b540+w79bb886ac47f")]:
        method = embedlab.load(spec)
        assert (method.spec, method.fingerprint) == (spec.split(":dtype")[0], fingerprint)


def test_other_computes_have_identities_of_their_own(minilm):
    bf16 = load_model("minilm", compute="bf16")
    assert bf16.fingerprint == "fcf7cd7986f4b540-bf16" and bf16.fp32_fingerprint == minilm.fingerprint
    assert store_for(bf16).key("A man plays a guitar.", None, 6) != store_for(minilm).key("A man plays a guitar.", None, 6)
    assert embedlab.load("minilm:quantize=int8").fingerprint == "fcf7cd7986f4b540-int8"
    assert embedlab.load("st:minilm,dtype=bf16").fingerprint == "fcf7cd7986f4b540-bf16"
    assert embedlab.load("match:minilm,dtype=bf16").fingerprint == "fcf7cd7986f4b540-bf16+w79bb886ac47f"


@pytest.mark.parametrize("options", ["dtype=bf16", "quantize=int8"])
@pytest.mark.crosspath
def test_lower_computes_keep_every_layer_and_stay_close_to_fp32(options):
    """bf16 and int8 compute still give every hidden state (first+last layers, a template, matching) and
    vectors close to fp32's; on a CPU without native bf16 this runs the emulated path, for correctness only."""
    spec = "minilm:layers=1+last,template=T0,pool=mask"
    exact = unit_rows(embedlab.load(spec).encode(TEXTS))
    lower = unit_rows(embedlab.load(f"{spec},{options}").encode(TEXTS))
    assert np.einsum("ij,ij->i", exact, lower).min() > (0.999 if options == "dtype=bf16" else 0.97)
    pairs = [(TEXTS[0], TEXTS[1]), (TEXTS[2], TEXTS[3])]
    np.testing.assert_allclose(embedlab.load(f"match:minilm,{options}").similarity_pairs(pairs),
                               embedlab.load("match:minilm").similarity_pairs(pairs), atol=0.05)


def test_int8_calls_print_no_quantization_bucket_warning_and_keep_sentence_transformers_bytes(caplog):
    """sentence-transformers warns "Computing int8 quantization buckets based on N embeddings" on every call of
    fewer than 100 vectors; embedlab drops that one line (its other messages pass) and its bytes stay the package's."""
    import logging

    method = embedlab.load("random:minilm")
    texts = ["A man plays a guitar.", "A woman reads.", "Stocks fell today."]
    with caplog.at_level(logging.INFO):
        for precision in ("int8", "uint8", "int8"):
            quantized = method.encode(texts, precision=precision)
            assert np.array_equal(quantized, quantize_embeddings(method.encode(texts), precision=precision))
        logging.getLogger(quantize_embeddings.__module__).warning("another message")
    messages = [record.getMessage() for record in caplog.records]
    assert not [message for message in messages if "quantization buckets" in message]
    assert "another message" in messages
