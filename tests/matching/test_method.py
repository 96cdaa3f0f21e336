"""The ``match:`` family: spec and pairwise contract, batching, BERTScore and raw dot products against a
direct transformers computation, the special-token switch, and learned-weight loading."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import embedlab
from embedlab.matching.method import RESOURCES, MatchingMethod, load_learned_weights, read_weights, write_weights
from embedlab.spec import SpecError


def test_spec_and_pairwise_contract():
    method = embedlab.load("match:minilm,score=max,weights=idf")
    assert isinstance(method, MatchingMethod) and method.pairwise
    assert method.spec == "match:minilm,score=max,weights=idf"
    assert embedlab.load("match:minilm,weights=learned").spec == "match:minilm"
    with pytest.raises(TypeError, match="pairwise"):
        method.encode(["a text"])
    with pytest.raises(SpecError, match="bertscore"):
        embedlab.load("match:minilm,mode=bertscore,score=max-2nd")
    with pytest.raises(SpecError, match="score"):
        embedlab.load("match:minilm,score=3max")
    with pytest.raises(TypeError, match="index 1"):
        method.similarity_pairs([("a", "b"), ("only one",)])


@pytest.mark.crosspath
def test_batching_equals_one_pair_at_a_time(sts_test_rows):
    pairs = [(a, b) for _, a, b in sts_test_rows[:6]] + [("Stop.", sts_test_rows[0][1])]
    method = embedlab.load("match:minilm,weights=idf")
    together = method.similarity_pairs(pairs, batch_size=4)
    assert together.dtype == np.float32 and together.shape == (len(pairs),)
    alone = np.concatenate([method.similarity_pairs([pair]) for pair in pairs])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert method.similarity_pairs([]).shape == (0,)


def _direct_token_vectors(minilm, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Last-layer vectors and ids of a text's non-special tokens, straight from transformers."""
    encoded = minilm.tokenizer(text, return_tensors="pt").to(minilm.device)
    with torch.inference_mode():
        hidden = minilm.model(**encoded).last_hidden_state[0].cpu().numpy()
    ids = encoded["input_ids"][0].cpu().numpy()
    content = ~np.isin(ids, minilm.tokenizer.all_special_ids)
    return hidden[content], ids[content]


@pytest.mark.crosspath
def test_bertscore_mode_matches_direct_computation(minilm):
    from embedlab.pooling.weights import reference_token_statistics

    reference, candidate = "A man is playing a flute.", "A man plays the bamboo flute loudly."
    idf = reference_token_statistics(minilm.tokenizer)[0]
    ref_vectors, ref_ids = _direct_token_vectors(minilm, reference)
    cand_vectors, cand_ids = _direct_token_vectors(minilm, candidate)
    ref_vectors /= np.linalg.norm(ref_vectors, axis=1, keepdims=True)
    cand_vectors /= np.linalg.norm(cand_vectors, axis=1, keepdims=True)
    similarity = ref_vectors @ cand_vectors.T
    recall = np.sum(similarity.max(axis=1) * idf[ref_ids]) / np.sum(idf[ref_ids])
    precision = np.sum(similarity.max(axis=0) * idf[cand_ids]) / np.sum(idf[cand_ids])
    expected = 2 * precision * recall / (precision + recall)
    got = embedlab.load("match:minilm,mode=bertscore").similarity_pairs([(reference, candidate)])[0]
    assert got == pytest.approx(expected, abs=1e-4)
    # raw dot products: the same matrix without normalising the token vectors
    raw = embedlab.load("match:minilm,mode=bertscore,normalise-tokens=no").similarity_pairs([(reference, candidate)])[0]
    raw_matrix = _direct_token_vectors(minilm, reference)[0] @ _direct_token_vectors(minilm, candidate)[0].T
    raw_r = np.sum(raw_matrix.max(axis=1) * idf[ref_ids]) / np.sum(idf[ref_ids])
    raw_p = np.sum(raw_matrix.max(axis=0) * idf[cand_ids]) / np.sum(idf[cand_ids])
    assert raw == pytest.approx(2 * raw_p * raw_r / (raw_p + raw_r), rel=1e-4)


def test_special_tokens_switch():
    text_a, text_b = "a man is performing a card trick", "a man is doing trick with play cards"
    excluded = embedlab.load("match:minilm,weights=none").explain(text_a, text_b)
    included = embedlab.load("match:minilm,weights=none,special=include").explain(text_a, text_b)
    assert included.matrix.shape == (excluded.matrix.shape[0] + 2, excluded.matrix.shape[1] + 2)
    assert included.tokens_a[0] == "[CLS]" and "[CLS]" not in excluded.tokens_a


def test_weight_file_validation(tmp_path):
    path = tmp_path / "w.safetensors"
    write_weights(path, np.array([1.0, -0.5], np.float32), "abc", {})
    with pytest.raises(ValueError, match="non-negative"):
        read_weights(path)
    write_weights(path, np.ones(3, np.float32), "abc", {})
    with pytest.raises(ValueError, match="vocabulary of 5"):
        read_weights(path, vocab_size=5)
    with pytest.raises(FileNotFoundError, match="not found"):
        read_weights(tmp_path / "missing.safetensors")


def test_packaged_minilm_weights(minilm):
    record = json.loads((RESOURCES / "minilm_token_weights.json").read_text())
    assert "embedlab train-token-weights minilm" in record["command"]
    weights = load_learned_weights(minilm)
    assert weights.shape == (len(minilm.tokenizer),) and weights.dtype == np.float32
    ids = minilm.tokenizer.convert_tokens_to_ids(["not", "the", "guitar"])
    assert weights[ids[0]] > 0.1  # negation keeps weight (the paper's motivating example)
    assert record["model_fingerprint"] == minilm.transformer_fingerprint
