"""Tests of embedlab.neural.variants: Eq. 1 and the Appendix G hidden-layer variants."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedlab.neural.options import NeuralOptions, block_vectors, resolve_parameter_names
from embedlab.neural.tuning import embed_texts
from embedlab.neural.variants import VARIANTS, shared_run_variants, weight_change_embedding


def test_eq1_weight_change_embedding_by_hand() -> None:
    changes = [torch.tensor([3.0, 4.0]), torch.tensor([0.0, 2.0, 0.0])]
    # normalised: [0.6, 0.8] and [0, 1, 0]; concatenated norm sqrt(2)
    expected = np.array([0.6, 0.8, 0.0, 1.0, 0.0]) / np.sqrt(2)
    assert np.allclose(weight_change_embedding(changes).numpy(), expected)
    with pytest.raises(ValueError, match="unchanged"):
        weight_change_embedding([torch.zeros(3)], "text 1")


def test_hidden_variants_of_appendix_g(masked_minilm, sentences) -> None:
    from embedlab.models.loading import load_model

    block = tuple(block_vectors(masked_minilm.num_layers))
    avg = embed_texts(masked_minilm, sentences[:2], NeuralOptions(block, epochs=2, variant="avg"))
    cls = embed_texts(masked_minilm, sentences[:2], NeuralOptions(block, epochs=2, variant="cls"))
    # untuned 'avg'/'cls' are the plain encoder outputs: mean over all tokens, and the [CLS] state
    base = load_model("minilm", device="cpu")
    for row, sentence in enumerate(sentences[:2]):
        encoded = base.tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            states = base.model(**encoded).last_hidden_state[0]
        assert np.allclose(avg[row], states.mean(dim=0).numpy(), atol=1e-5)
        assert np.allclose(cls[row], states[0].numpy(), atol=1e-5)
    tuned = embed_texts(masked_minilm, sentences[:2], NeuralOptions(block, epochs=2, variant="avg-tuned"))
    diff = embed_texts(masked_minilm, sentences[:2], NeuralOptions(block, epochs=2, variant="avg-diff"))
    assert np.allclose(diff, tuned - avg, atol=1e-5)
    assert np.abs(diff).max() > 1e-3
    with pytest.raises(ValueError, match="must tune the last block"):
        embed_texts(masked_minilm, sentences[:1], NeuralOptions(tuple(resolve_parameter_names("head", 6)), variant="cls-tuned"))
    with pytest.raises(ValueError, match="batched path only"):
        embed_texts(masked_minilm, sentences[:1], NeuralOptions(block, variant="cls"), path="reference")
    with pytest.raises(ValueError, match="unknown variant"):
        embed_texts(masked_minilm, sentences[:1], NeuralOptions(block, variant="mean"))


def test_which_variants_one_run_shares() -> None:
    block = tuple(block_vectors(6))
    assert shared_run_variants(NeuralOptions(block, variant="cls-diff"), 6) == VARIANTS
    # a head-tuned run has no hidden-layer variants to share; an untuned one only its untuned sibling
    assert shared_run_variants(NeuralOptions(tuple(resolve_parameter_names("head", 6))), 6) == ("neural",)
    assert shared_run_variants(NeuralOptions(block, variant="avg"), 6) == ("cls", "avg")
