"""The vocabulary-wide products in fp32 (the definition) and in a lower compute (float32 out, close to it)."""

import pytest
import torch

from embedlab.neural.vocabulary import lowered_decoder, softmax_terms


@pytest.fixture
def head():
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(40, 16, generator=generator)
    weight = torch.randn(300, 16, generator=generator) * 0.5
    bias = torch.randn(300, generator=generator) * 0.1
    return z, weight, bias


def test_fp32_terms_are_the_softmax_by_definition(head) -> None:
    z, weight, bias = head
    ids, normaliser, mean = softmax_terms(z, weight, bias, lowered_decoder(weight, "fp32"), count=5)
    logits = (z.double() @ weight.double().T + bias.double())
    assert torch.allclose(normaliser.double(), torch.logsumexp(logits, dim=-1), atol=1e-5)  # float32 rounding of unit-scale sums
    assert torch.allclose(mean.double(), torch.softmax(logits, dim=-1) @ weight.double(), atol=1e-5)
    assert torch.equal(torch.sort(ids, dim=-1).values, torch.sort(logits.topk(5, dim=-1).indices, dim=-1).values)


@pytest.mark.parametrize("compute", ["bf16", "fp16"])
def test_lower_compute_terms_are_float32_and_close(head, compute) -> None:
    z, weight, bias = head
    _, exact_normaliser, exact_mean = softmax_terms(z, weight, bias, None)
    ids, normaliser, mean = softmax_terms(z, weight, bias, lowered_decoder(weight, compute))
    assert ids is None and normaliser.dtype == mean.dtype == torch.float32
    tolerance = 0.05 if compute == "bf16" else 0.01  # logits rounded to 8 (bf16) or 11 (fp16) bits of mantissa, |logit| ≲ 8
    assert torch.allclose(normaliser, exact_normaliser, atol=tolerance) and torch.allclose(mean, exact_mean, atol=tolerance)
    assert not torch.equal(mean, exact_mean)
