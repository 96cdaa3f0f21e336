"""Tests of embedlab.neural.replay: the batched path for pre-LN last blocks and ALBERT's shared layer.

On tiny random models (tests/conformance/tiny_models.py): the batched path (the block re-run every epoch
with per-text rows) equals the per-text reference path, which runs the whole model with the real modules.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.tiny_models import build_tiny
from embedlab.neural.family import NeuralEmbedder
from embedlab.neural.tuning import embed_texts
from embedlab.neural.batched import micro_tune_batched
from embedlab.neural.frozen import same_shape_batches
from embedlab.neural.head import load_masked_lm
from embedlab.neural.inputs import BLUEPRINTS, causal_text_inputs, padded_inputs, text_inputs
from embedlab.neural.options import NeuralOptions, resolve_parameter_names
from embedlab.neural.replay import ReplayedModule
from embedlab.neural.top import BatchedTop
from embedlab.neural.variants import hidden_variants, readable_variants, shared_run_variants
from tolerance import TUNED_COSINE_FLOOR

REPLAYED = ("ALBERT", "ModernBERT", "GPT-2", "Llama", "Qwen2", "Gemma3")
TEXTS = [
    "A man is playing a guitar on the stage.",
    "Two dogs run through the snow.",
    "Stock market fell sharply on Tuesday after the announcement, and the crowd cheered.",
    "She cut",
]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("replayed")
    return {architecture: load_masked_lm(str(build_tiny(architecture, folder / architecture))) for architecture in REPLAYED}


@pytest.mark.parametrize("architecture", REPLAYED)
@pytest.mark.parametrize("softmax", ["exact", "candidates"])
@pytest.mark.crosspath
def test_block_preset_batched_equals_reference_and_is_batch_independent(tiny_models, architecture: str, softmax: str) -> None:
    masked_lm = tiny_models[architecture]
    names = tuple(resolve_parameter_names("block", masked_lm.num_layers, masked_lm.layout))
    options = NeuralOptions(names, epochs=4, softmax=softmax, candidates=8)
    batched = embed_texts(masked_lm, TEXTS, options, path="batched")
    reference = embed_texts(masked_lm, TEXTS, options, path="reference")
    alone = np.concatenate([embed_texts(masked_lm, [text], options, path="batched") for text in TEXTS])
    assert batched.shape == (len(TEXTS), sum(masked_lm.model.get_parameter(name).numel() for name in names))
    assert np.isfinite(batched).all() and np.abs(batched).max() > 0
    # the other path, or each text tuned alone: float32 rounding carried on by the gradient steps (docs/neural.md)
    assert (cosine(batched, reference) >= TUNED_COSINE_FLOOR).all()
    assert (cosine(batched, alone) >= TUNED_COSINE_FLOOR).all()


@pytest.mark.parametrize("architecture", ["ModernBERT", "Llama", "Gemma3"])
@pytest.mark.crosspath
def test_head_and_block_vectors_tuned_together(tiny_models, architecture: str) -> None:
    masked_lm = tiny_models[architecture]
    options = NeuralOptions((*masked_lm.layout.head_vectors, *masked_lm.layout.block_vectors), epochs=3)
    batched = embed_texts(masked_lm, TEXTS, options, path="batched")
    reference = embed_texts(masked_lm, TEXTS, options, path="reference")
    assert (cosine(batched, reference) >= 0.99999).all()


@pytest.mark.parametrize("architecture", REPLAYED)
@pytest.mark.crosspath
def test_replaying_the_recorded_call_with_untuned_rows_gives_the_models_features(tiny_models, architecture: str) -> None:
    masked_lm = tiny_models[architecture]
    layout = masked_lm.layout
    make = causal_text_inputs if layout.causal else text_inputs
    group = [make(text, masked_lm.tokenizer, masked_lm.max_length, BLUEPRINTS, f"text {index}") for index, text in enumerate(TEXTS)]
    top = BatchedTop(masked_lm, layout.block_vectors, len(group))
    assert top.replay and not top.block_mode
    replayed = ReplayedModule(masked_lm, group, top.tuned, top.original)
    try:
        with torch.no_grad():
            again = replayed.features()
    finally:
        replayed.close()
    expected = []
    with torch.no_grad():
        for batch in same_shape_batches(group, 1024):
            ids = torch.cat([group[index].input_ids for index in batch])
            attention = torch.cat([group[index].attention_mask for index in batch])
            features = layout.features(masked_lm.model, ids, attention)
            for index, rows in zip(batch, features.split([len(group[index].input_ids) for index in batch])):
                expected.append((index, rows[group[index].labels != -100]))
    expected = torch.cat([rows for _, rows in sorted(expected, key=lambda pair: pair[0])])
    assert torch.allclose(replayed.frozen.features, expected, atol=1e-5)
    assert torch.allclose(again, expected, atol=1e-5)
    # the hooks are gone: the model's own modules compute what they did before
    assert not any(module._forward_hooks for module in masked_lm.model.modules())


def test_auto_path_is_batched_for_the_block_preset_and_a_causal_lm_has_no_cls_variant(tiny_models) -> None:
    embedder = NeuralEmbedder(str(tiny_models["Llama"].path), {"params": "block"}, use_cache=False)
    embedder._masked_lm = tiny_models["Llama"]
    assert embedder.path == "batched"
    with pytest.raises(ValueError, match="has seen only itself"):
        embed_texts(tiny_models["Llama"], TEXTS[:1], NeuralOptions(tiny_models["Llama"].layout.block_vectors, variant="cls-tuned"))
    assert shared_run_variants(NeuralOptions(tiny_models["Llama"].layout.block_vectors), 2, tiny_models["Llama"].layout) == (
        "neural", "avg", "avg-tuned", "avg-diff")


def _plain_hidden(masked_lm, inputs) -> list[torch.Tensor]:
    """The model's own last hidden states of a text's unmasked rows, real tokens only (what the variants read)."""
    ids, attention = (inputs.input_ids, inputs.attention_mask) if masked_lm.layout.causal else padded_inputs(inputs.chunks, masked_lm.tokenizer)
    with torch.no_grad():
        hidden = masked_lm.model.base_model(input_ids=ids, attention_mask=attention).last_hidden_state
    return [rows[mask] for rows, mask in zip(hidden, attention.bool())]


@pytest.mark.parametrize("architecture", ["ALBERT", "ModernBERT", "Llama"])
@pytest.mark.crosspath
def test_appendix_g_variants_on_replayed_models_are_the_models_hidden_states_before_and_after_tuning(tiny_models, architecture: str) -> None:
    masked_lm = tiny_models[architecture]
    layout = masked_lm.layout
    make = causal_text_inputs if layout.causal else text_inputs
    group = [make(text, masked_lm.tokenizer, masked_lm.max_length, BLUEPRINTS, f"text {index}") for index, text in enumerate(TEXTS[:2])]
    run = micro_tune_batched(masked_lm, group, NeuralOptions(layout.block_vectors, epochs=2), need_plain=True)
    for index, inputs in enumerate(group):
        untuned = _plain_hidden(masked_lm, inputs)
        # the tuned states equal a forward of the whole model with this text's tuned vectors written into it
        parameters = [masked_lm.model.get_parameter(name) for name in layout.block_vectors]
        saved = [parameter.detach().clone() for parameter in parameters]
        with torch.no_grad():
            for parameter, change in zip(parameters, run.changes[index]):
                parameter += change
        try:
            tuned = _plain_hidden(masked_lm, inputs)
        finally:
            with torch.no_grad():
                for parameter, value in zip(parameters, saved):
                    parameter.copy_(value)
        states = run.replayed_states[index]
        # replayed vs a plain forward of the tiny model (unit-scale states): float32 rounding
        assert all(torch.allclose(got, want, atol=1e-5) for got, want in zip(states[False], untuned))
        assert all(torch.allclose(got, want, atol=1e-5) for got, want in zip(states[True], tuned))
        assert not all(torch.allclose(got, want, atol=1e-5) for got, want in zip(states[True], untuned))  # tuning moved them
        vectors = hidden_variants(run.top, run.frozen, index, readable_variants(layout)[1:], states)
        assert torch.allclose(vectors["avg"], torch.cat(untuned).mean(dim=0), atol=1e-5)
        assert torch.allclose(vectors["avg-diff"], vectors["avg-tuned"] - vectors["avg"], atol=1e-6)  # one subtraction apart
        if not layout.causal:
            assert torch.allclose(vectors["cls"], untuned[0][0], atol=1e-5)
