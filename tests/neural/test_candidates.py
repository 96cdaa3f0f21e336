"""Tests of embedlab.neural.candidates and the candidate-set softmax on both micro-tuning paths."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from embedlab.neural.candidates import (
    candidate_cross_entropy,
    candidate_sets,
    pad_candidates,
    residual_from_logits,
    residual_from_totals,
    residual_logit,
    top_ids,
)
from embedlab.neural.family import NeuralEmbedder
from embedlab.neural.tuning import embed_texts
from embedlab.neural.options import NeuralOptions, resolve_parameter_names
from tolerance import TUNED_COSINE_FLOOR


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def small_decoder() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A 7-token, 3-dimensional decoder (weight, bias) and two decoder inputs z₀, in float64."""
    generator = torch.Generator().manual_seed(3)
    weight = torch.randn(7, 3, generator=generator, dtype=torch.float64)
    bias = torch.randn(7, generator=generator, dtype=torch.float64)
    z0 = torch.randn(2, 3, generator=generator, dtype=torch.float64)
    return weight, bias, z0


def test_candidate_sets_are_each_texts_own_union_with_its_labels() -> None:
    top = torch.tensor([[5, 2], [2, 9], [3, 1]])
    sets, targets = candidate_sets(top, torch.tensor([7, 2, 4]), torch.tensor([0, 0, 1]), 3)
    assert [ids.tolist() for ids in sets] == [[2, 5, 7, 9], [1, 3, 4], []]
    assert targets.tolist() == [2, 0, 2]
    padded, valid = pad_candidates(sets[:2])
    assert padded.tolist() == [[2, 5, 7, 9], [1, 3, 4, 0]]
    assert valid.tolist() == [[True] * 4, [True, True, True, False]]


@pytest.mark.parametrize(("vocabulary", "count"), [(30522, 256), (30522, 64), (1000, 8), (300, 16)])
def test_top_ids_are_torch_topks_ids(vocabulary: int, count: int) -> None:
    generator = torch.Generator().manual_seed(vocabulary + count)
    logits = torch.randn(40, vocabulary, generator=generator) * 3
    logits[0, -1] = 100.0  # a winner past the last whole block of 32
    logits[1, :count] = 50.0 + torch.arange(count)  # all winners in the first blocks
    expected = logits.topk(count, dim=-1).indices.sort(dim=-1).values
    assert torch.equal(top_ids(logits, count).sort(dim=-1).values, expected)
    assert torch.equal(top_ids(logits[:, : vocabulary // 2], count).sort(dim=-1).values, logits[:, : vocabulary // 2].topk(count, dim=-1).indices.sort(dim=-1).values)


def test_residual_gradient_equals_autograd_of_the_outside_log_sum_exp() -> None:
    weight, bias, z0 = small_decoder()
    candidates = torch.tensor([1, 4])
    outside = torch.tensor([0, 2, 3, 5, 6])
    # the quantity the residual logit replaces: logsumexp over V∖C, differentiated by autograd at z₀
    z = z0.clone().requires_grad_(True)
    exact = torch.logsumexp(z @ weight[outside].T + bias[outside], dim=-1)
    (exact_grad,) = torch.autograd.grad(exact.sum(), z)
    logits0 = z0 @ weight.T + bias
    by_definition = residual_from_logits(logits0, candidates, weight)
    normaliser = torch.logsumexp(logits0, dim=-1)
    by_totals = residual_from_totals(normaliser, torch.softmax(logits0, dim=-1) @ weight, logits0[:, candidates], weight[candidates])
    for residual, mean in (by_definition, by_totals):
        z = z0.clone().requires_grad_(True)
        first_order = residual_logit(z, z0, residual, mean)
        (grad,) = torch.autograd.grad(first_order.sum(), z)
        assert torch.allclose(first_order.detach(), exact.detach(), atol=1e-12)
        assert torch.allclose(grad, exact_grad, atol=1e-12)


def test_cross_entropy_over_candidates_and_residual_equals_the_full_one_at_z0() -> None:
    weight, bias, z0 = small_decoder()
    candidates = torch.tensor([1, 4])
    labels = torch.tensor([4, 1])
    logits0 = z0 @ weight.T + bias
    residual, mean = residual_from_logits(logits0, candidates, weight)
    z = z0.clone().requires_grad_(True)
    ours = candidate_cross_entropy(z @ weight[candidates].T + bias[candidates], residual_logit(z, z0, residual, mean), torch.tensor([1, 0]))
    (our_grad,) = torch.autograd.grad(ours.sum(), z)
    z = z0.clone().requires_grad_(True)
    full = torch.nn.functional.cross_entropy(z @ weight.T + bias, labels, reduction="none")
    (full_grad,) = torch.autograd.grad(full.sum(), z)
    assert torch.allclose(ours.detach(), full.detach(), atol=1e-12) and torch.allclose(our_grad, full_grad, atol=1e-12)


def test_candidates_covering_the_vocabulary_leave_no_residual() -> None:
    weight, bias, z0 = small_decoder()
    logits0 = z0 @ weight.T + bias
    everything = torch.arange(7)
    residual, mean = residual_from_logits(logits0, everything, weight)
    assert torch.isneginf(residual).all() and (mean == 0).all()
    residual, mean = residual_from_totals(torch.logsumexp(logits0, dim=-1), torch.softmax(logits0, dim=-1) @ weight, logits0, weight)
    assert torch.isneginf(residual).all() and (mean == 0).all()


def candidate_options(masked_lm, preset: str, count: int, epochs: int = 4) -> tuple[NeuralOptions, NeuralOptions]:
    exact = NeuralOptions(tuple(resolve_parameter_names(preset, masked_lm.num_layers)), epochs=epochs)
    return exact, dataclasses.replace(exact, softmax="candidates", candidates=count)


@pytest.mark.crosspath
def test_whole_vocabulary_as_candidates_reproduces_exact(masked_minilm, sentences) -> None:
    exact, candidates = candidate_options(masked_minilm, "head", int(masked_minilm.model.config.vocab_size))
    expected = embed_texts(masked_minilm, sentences[:2], exact)
    # the same loss by another formula (candidates + residual): float32 rounding carried on by the gradient steps
    assert (cosine(expected, embed_texts(masked_minilm, sentences[:2], candidates)) >= TUNED_COSINE_FLOOR).all()
    assert (cosine(expected, embed_texts(masked_minilm, sentences[:2], candidates, path="reference")) >= TUNED_COSINE_FLOOR).all()


@pytest.mark.parametrize("preset", ["head", "block"])
@pytest.mark.crosspath
def test_reference_and_batched_candidates_agree_and_are_batch_independent(masked_minilm, sentences, preset: str) -> None:
    exact, candidates = candidate_options(masked_minilm, preset, 64)
    batched = embed_texts(masked_minilm, sentences, candidates)
    reference = embed_texts(masked_minilm, sentences, candidates, path="reference")
    assert (cosine(reference, batched) >= 0.9999).all()  # two implementations of the steps, as in tests/neural/test_batched.py
    alone = embed_texts(masked_minilm, sentences[1:2], candidates)
    reordered = embed_texts(masked_minilm, [sentences[2], sentences[1]], candidates)
    assert cosine(alone, batched[1:2])[0] >= TUNED_COSINE_FLOOR and cosine(reordered[1:2], batched[1:2])[0] >= TUNED_COSINE_FLOOR  # other groups
    # an approximation of exact, not exact itself
    differences = 1 - cosine(embed_texts(masked_minilm, sentences, exact), batched)
    assert (differences > 0).any() and (differences < 0.05).all()


def test_family_option_and_cache_key(masked_minilm) -> None:
    exact = NeuralEmbedder("minilm")
    candidates = NeuralEmbedder("minilm", {"softmax": "candidates", "candidates": "64"})
    assert candidates.options.softmax == "candidates" and candidates.options.candidates == 64
    assert "softmax" not in exact.options.key()  # exact embeddings keep the keys they were cached under
    assert exact.cache_key("a text") != candidates.cache_key("a text")
    with pytest.raises(ValueError):
        NeuralEmbedder("minilm", {"candidates": "0"})
