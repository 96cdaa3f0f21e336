"""Tests of embedlab.neural.reference: the per-text path with the real modules and torch's AdamW."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedlab.neural.tuning import embed_texts
from embedlab.neural.inputs import text_inputs
from embedlab.neural.options import NeuralOptions, resolve_parameter_names
from embedlab.neural.reference import micro_tune_reference, text_seed


def test_reference_path_accepts_other_parameters(masked_minilm, sentences) -> None:
    names = ("bert.encoder.layer.4.output.dense.bias",)
    options = NeuralOptions(names, epochs=2)
    vectors = embed_texts(masked_minilm, sentences[:1], options, path="reference")
    assert vectors.shape == (1, 384) and np.isclose(np.linalg.norm(vectors), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="batched path does not cover"):
        embed_texts(masked_minilm, sentences[:1], options, path="batched")
    with pytest.raises(ValueError, match="only 1-D"):
        embed_texts(masked_minilm, sentences[:1], NeuralOptions(("cls.predictions.transform.dense.weight",)), path="reference")
    with pytest.raises(ValueError, match="no parameter"):
        embed_texts(masked_minilm, sentences[:1], NeuralOptions(("cls.nothing.bias",)), path="reference")
    # the model is left exactly as it was
    state = dict(masked_minilm.model.named_parameters())
    assert not state[names[0]].requires_grad


def test_micro_tuning_restores_the_model_and_is_seeded(masked_minilm, sentences) -> None:
    options = NeuralOptions(tuple(resolve_parameter_names("head", masked_minilm.num_layers)), epochs=2)
    inputs = text_inputs(sentences[0], masked_minilm.tokenizer, masked_minilm.max_length, options.blueprints, "text 0")
    state = dict(masked_minilm.model.named_parameters())
    before = {name: state[name].detach().clone() for name in options.params}
    first = micro_tune_reference(masked_minilm, inputs, options, text_seed(0, sentences[0]))
    second = micro_tune_reference(masked_minilm, inputs, options, text_seed(0, sentences[0]))
    assert [change.shape for change in first] == [(384,)] * 3 and all(change.abs().max() > 0 for change in first)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert all(torch.equal(state[name], before[name]) for name in options.params)
    assert text_seed(0, sentences[0]) != text_seed(0, sentences[1]) != text_seed(1, sentences[1])
