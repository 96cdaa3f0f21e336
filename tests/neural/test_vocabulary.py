"""The vocabulary-wide products in fp32 (the definition) and in a lower compute (float32 out, close to it)."""

import pytest
import torch

from embedlab.neural.vocabulary import lowered_copy, lowered_decoder, softmax_terms


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


def test_lowered_copy_equals_a_deep_copy_cast_and_keeps_ties_and_the_original() -> None:
    """The copy made by casting each tensor once equals ``deepcopy(model).to(dtype)`` bit for bit (the same casts),
    keeps tied weights tied, and leaves the float32 model as it was."""
    import copy

    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)).eval()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    lowered = lowered_copy(model, torch.bfloat16)
    reference = copy.deepcopy(model).to(torch.bfloat16)
    assert lowered.state_dict().keys() == reference.state_dict().keys()
    for name, tensor in reference.state_dict().items():
        assert lowered.state_dict()[name].dtype == tensor.dtype and torch.equal(lowered.state_dict()[name], tensor), name  # the same casts
    assert lowered.get_output_embeddings().weight is lowered.get_input_embeddings().weight  # still tied
    assert all(torch.equal(tensor, before[name]) and tensor.dtype == before[name].dtype for name, tensor in model.state_dict().items())
    ids = torch.tensor([[2, 7, 9, 3]])
    with torch.inference_mode():
        assert torch.equal(lowered(input_ids=ids).logits, reference(input_ids=ids).logits)  # the same modules, the same weights


@pytest.mark.parametrize("compute", ["fp32", "bf16"])
def test_reused_buffers_give_the_fresh_tensors_numbers(head, compute) -> None:
    """Slices written into one set of reused buffers (a larger slice, then a smaller one: a view of its first rows)
    give what the unbuffered form gives, bit for bit: the same kernels (addmm is what ``linear`` calls; a copy then
    an add is ``.float().add_``) on the same values. The unbuffered form is written out here as it was before."""
    from embedlab.neural.candidates import top_ids
    from embedlab.neural.vocabulary import VocabularyBuffers

    z, weight, bias = head
    lowered = lowered_decoder(weight, compute)

    def unbuffered(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if lowered is None:
            logits = torch.nn.functional.linear(rows, weight, bias)
        else:
            logits = torch.nn.functional.linear(rows.to(lowered.dtype), lowered).float().add_(bias)
        ids = top_ids(logits, 5)
        highest = logits.amax(dim=-1, keepdim=True)
        exponentials = logits.sub_(highest).exp_()
        totals = exponentials.sum(dim=-1, keepdim=True)
        products = exponentials @ weight if lowered is None else (exponentials.to(lowered.dtype) @ lowered).float()
        return ids, (highest + totals.log()).squeeze(-1), products / totals

    buffers = VocabularyBuffers()
    for rows in (z[:30], z[30:]):
        for got, expected in zip(softmax_terms(rows, weight, bias, lowered, 5, buffers), unbuffered(rows)):
            assert torch.equal(got, expected)
