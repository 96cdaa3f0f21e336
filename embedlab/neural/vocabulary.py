"""The vocabulary-wide products of micro-tuning, in fp32 or a lower compute (``dtype=bf16|fp16``).

An epoch over the whole vocabulary costs two products per masked position: the logits ``z · Wᵀ`` and the
softmax-weighted mean of the output embeddings ``p · W`` (positions × vocabulary × hidden each), which
is the decoder's backward written out: ``∂CE/∂z = (Σ_v p_v·W_v − W_y)·weight``. In a lower compute both
products read a copy of the output embeddings in that dtype (cast once per group) and return to float32
at once, and the frozen forward runs a copy of the model in that dtype (:func:`forward_model`); the softmax, its normaliser, the gradient through the head transform to the tuned vectors, the
AdamW state and the weight change stay float32. Done as a matmul in bf16, with the rest float32, the
candidate-set path's embeddings stayed at cosine ≥ 0.998 to exact fp32 on STS-B sentences; autocasting
the whole epoch (the head transform and its backward too) gave 0.945, so the narrow form is the one used.
"""

from __future__ import annotations

import copy

import torch

from embedlab.models.precision import TORCH_DTYPES
from embedlab.neural.candidates import top_ids
from embedlab.neural.head import MaskedLM
from embedlab.runtime.memo import memo

_LOWERED_MODELS = memo("neural.lowered_models", maxsize=2)
_LOWERED_DECODERS = memo("neural.lowered_decoders", maxsize=2)


def lowered_decoder(decoder_weight: torch.Tensor, compute: str) -> torch.Tensor | None:
    """The output embeddings in ``compute`` (None for fp32: the float32 weight itself is used)."""
    return None if compute == "fp32" else decoder_weight.to(TORCH_DTYPES[compute])


def model_lowered_decoder(masked_lm: MaskedLM, compute: str) -> torch.Tensor | None:
    """:func:`lowered_decoder` of ``masked_lm``'s output embeddings, cast once per process (as :func:`forward_model`'s
    copy is) rather than once per group: 5 ms each time for MiniLM's 30,522 × 384."""
    if compute == "fp32":
        return None
    decoder_weight = masked_lm.model.get_output_embeddings().weight.detach()
    key = (masked_lm.name, str(masked_lm.path), masked_lm.fingerprint, str(decoder_weight.device), compute)
    return _LOWERED_DECODERS.get(key, lambda: lowered_decoder(decoder_weight, compute))


def forward_model(masked_lm: MaskedLM, compute: str) -> torch.nn.Module:
    """The model the frozen forward runs: ``masked_lm``'s own for fp32, else a copy with its weights in
    ``compute`` on the same device, made once per process. Weights cast once beat ``torch.autocast``,
    which casts every weight at every call: on MiniLM's frozen forward over 20 STS-B sentences (CPU time,
    AVX-512 BF16) autocast took 3.51 s against fp32's 3.40 s, the bf16 copy 1.89 s."""
    if compute == "fp32":
        return masked_lm.model
    device = next(masked_lm.model.parameters()).device
    key = (masked_lm.name, str(masked_lm.path), masked_lm.fingerprint, str(device), compute)
    return _LOWERED_MODELS.get(key, lambda: lowered_copy(masked_lm.model, TORCH_DTYPES[compute]))


def lowered_copy(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of ``model`` with its floating-point parameters and buffers in ``dtype``, the original untouched.

    Each tensor is cast once, straight from the original, and handed to ``copy.deepcopy`` as already copied:
    a plain deep copy followed by ``.to(dtype)`` first duplicated every float32 weight only to cast and
    drop it (MiniLM: 0.117 s against 0.045 s, and twice the memory for the moment)."""
    copied: dict[int, object] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        cast = tensor.detach().to(dtype) if tensor.is_floating_point() else tensor.detach().clone()
        copied[id(tensor)] = torch.nn.Parameter(cast, requires_grad=False) if isinstance(tensor, torch.nn.Parameter) else cast
    return copy.deepcopy(model, copied)


class VocabularyBuffers:
    """(positions × vocabulary) buffers reused by every slice of one epoch's :func:`softmax_terms`.

    Each slice's logits are 31 MB in float32 for BERT's vocabulary at 256 positions, and 16 MB more for the bf16
    products. Allocated afresh, every slice page-faulted them in again: with these buffers (and the heap trimmed
    only once it has grown, :class:`~embedlab.runtime.memory.HeapTrimmer`) the candidate-set bf16 path's minor
    faults over 40 STS-B sentences went from 115,000–180,000 to 22,000–68,000, with the same numbers."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def take(self, role: str, rows: int, columns: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A (rows, columns) buffer of ``dtype`` for ``role``, the same memory as the last take's where it fits
        (its first rows: a contiguous view); contents undefined."""
        key = (role, dtype)
        held = self._held.get(key)
        if held is None or held.shape[0] < rows or held.shape[1] != columns or held.device != device:
            held = torch.empty(rows, columns, dtype=dtype, device=device)
            self._held[key] = held
        return held[:rows]


@torch.no_grad()
def softmax_terms(
    z: torch.Tensor, decoder_weight: torch.Tensor, output_bias: torch.Tensor, lowered: torch.Tensor | None, count: int | None = None,
    buffers: VocabularyBuffers | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """(top-``count`` ids or None, log-sum-exp (P,), softmax-weighted mean of the output embeddings (P, H)) of ``z``.

    The softmax is taken in place in the logits buffer (one exponential per logit, no second
    vocabulary-sized buffer) once the top-K ids are read off, and normalised after the product with the
    output embeddings, on (positions × hidden) values rather than (positions × vocabulary).
    ``lowered``: the output embeddings in a lower compute for both products (None: float32 throughout); its
    logits come back to float32 before the bias is added. ``buffers``: where the vocabulary-sized values go
    (:class:`VocabularyBuffers`; the same numbers as fresh tensors, the same kernels writing them).
    """
    buffers = buffers if buffers is not None else VocabularyBuffers()
    rows, vocabulary = z.shape[0], decoder_weight.shape[0]
    logits = buffers.take("logits", rows, vocabulary, torch.float32, z.device)
    if lowered is None:
        torch.addmm(output_bias, z, decoder_weight.t(), out=logits)
    else:
        products_lowered = buffers.take("lowered", rows, vocabulary, lowered.dtype, z.device)
        torch.mm(z.to(lowered.dtype), lowered.t(), out=products_lowered)
        logits.copy_(products_lowered).add_(output_bias)  # float32 from here on (a mixed-dtype add in one pass: 3× slower)
    ids = top_ids(logits, count) if count else None
    highest = logits.amax(dim=-1, keepdim=True)
    exponentials = logits.sub_(highest).exp_()
    totals = exponentials.sum(dim=-1, keepdim=True)
    if lowered is None:
        products = exponentials @ decoder_weight
    else:
        products = (products_lowered.copy_(exponentials) @ lowered).float()
    mean = products / totals
    return ids, (highest + totals.log()).squeeze(-1), mean
