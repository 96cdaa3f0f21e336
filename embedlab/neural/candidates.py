"""The candidate-set softmax: the math shared by the reference and batched paths.

Why it is cheap: every epoch of exact micro-tuning needs logits over the whole vocabulary V at every
masked position, yet after epoch 1 almost all of the softmax mass sits on a few hundred tokens and the
tuned vectors move little. So epoch 1 runs exactly; from then on each text keeps a candidate set C (the
union over its masked positions of their epoch-1 top-K tokens, plus its labels) and each position's
logits are computed over C only, plus ONE residual logit ``r`` standing for the rest of the vocabulary.

Why the residual needs a first-order term. The exact loss at a position with decoder input ``z`` is
``CE = logsumexp_v(z·W_v + b_v) − (z·W_y + b_y)``; split the log-sum-exp into C and its complement
``V∖C``, whose part is ``R(z) = logsumexp_{v∉C}(z·W_v + b_v)``. Then ``CE = logsumexp(logits_C, R(z)) −
logit_y`` exactly, and ``∂CE/∂z`` carries ``softmax(R)·∂R/∂z`` with ``∂R/∂z = Σ_{v∉C} softmax_{V∖C}(v)·W_v
=: μ(z)``. Dropping R (no residual logit) renormalises the softmax over C, overstating every candidate's
probability; keeping it constant ``R(z₀)`` gets the value right at ``z₀`` (the epoch-1 decoder input) but
its gradient is zero, so the tuned vectors never feel the pull away from the rest of the vocabulary. The
tangent ``r(z) = R₀ + (z − z₀)·μ₀`` with ``R₀ = R(z₀)``, ``μ₀ = μ(z₀)`` matches R in value and gradient
at ``z₀``; its error is second order in ``z − z₀``, which stays small at micro-tuning's learning rates.

Costs: R₀ and μ₀ come from what epoch 1 computes anyway (the full log-sum-exp and the full
softmax-weighted mean of the output embeddings, which is the backward product), minus the candidates'
share: :func:`residual_from_totals`. :func:`residual_from_logits` is the definition, for the reference
path and tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

SOFTMAX_MODES = ("exact", "candidates")
# Outside mass below this is rounding: float32 probabilities summed over the vocabulary are good to ~1e-6.
MASS_FLOOR = 1e-6
# Block sizes of top_ids' filter: 32 ids (vectorised maxima, a small heap over V/32 of them), then 8.
TOP_BLOCKS = (32, 8)


def candidate_sets(top_ids: torch.Tensor, labels: torch.Tensor, owner: torch.Tensor, texts: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Each text's candidate set and each position's label column in its own text's set.

    ``top_ids`` (P, K): every masked position's epoch-1 top-K ids; ``labels``, ``owner`` (P,): its label
    and its text (0 … texts−1). A text's set is the sorted union of its positions' top-K ids and labels —
    never its neighbours': the sets are computed at once on (text, id) keys.
    """
    vocabulary = int(max(top_ids.max(), labels.max())) + 1
    members = torch.cat([top_ids, labels.unsqueeze(1)], dim=1)
    keys = torch.unique(owner.unsqueeze(1) * vocabulary + members, sorted=True)
    sizes = torch.bincount(keys // vocabulary, minlength=texts)
    offsets = torch.cumsum(sizes, 0) - sizes
    targets = torch.searchsorted(keys, owner * vocabulary + labels) - offsets[owner]
    return list(torch.split(keys % vocabulary, sizes.tolist())), targets


def top_ids(logits: torch.Tensor, count: int) -> torch.Tensor:
    """Each row's ``count`` highest-scoring ids of ``logits`` (rows, V), unordered (all ids when ``count`` ≥ V).

    Why not torch.topk alone: on CPU it keeps a heap per row, which at BERT's vocabulary and K = 256
    costs about a third of the logits' own matrix product. The filter here rests on one fact: a row's
    ``count`` highest values lie in the ``count`` blocks (of consecutive ids) with the highest maxima,
    since a value in any other block is beaten by each of those blocks' maxima. So vectorised block
    maxima pick ``count`` blocks of 32 ids per row (:data:`TOP_BLOCKS`), blocks of 8 are picked within
    them the same way, and torch.topk runs over the few values left (plus the ids past the last whole
    block). The ids are torch.topk's but for ties: where several values tie for the last place, either
    may be kept.
    """
    if logits.stride(-1) != 1:  # the blocks are read as runs of consecutive memory
        logits = logits.contiguous()
    rows, vocabulary = logits.shape
    whole = vocabulary // TOP_BLOCKS[0] * TOP_BLOCKS[0]
    if whole < count * TOP_BLOCKS[0]:
        return logits.topk(min(count, vocabulary), dim=-1, sorted=False).indices
    values, ids = logits[:, :whole], None
    for block in TOP_BLOCKS:
        values, starts = _best_blocks(values, count, block)
        columns = (starts.unsqueeze(-1) + torch.arange(block, device=logits.device)).reshape(rows, -1)
        ids = columns if ids is None else ids.gather(1, columns)
    values = torch.cat([values, logits[:, whole:]], dim=1)
    ids = torch.cat([ids, torch.arange(whole, vocabulary, device=logits.device).expand(rows, -1)], dim=1)
    return ids.gather(1, values.topk(count, dim=-1, sorted=False).indices)


def _best_blocks(values: torch.Tensor, count: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's ``count`` blocks of ``block`` columns with the highest maxima: (their values, their first columns).

    ``values`` (rows, blocks × block) may be a column slice of a larger row-major tensor. The blocks
    are copied out as rows of a view of overlapping ``block``-wide windows, which ``index_select``
    copies whole (three times faster than advanced indexing here).
    """
    rows, width = values.shape
    row_stride = values.stride(0)
    maxima = values.as_strided((rows, width // block, block), (row_stride, block, 1)).amax(dim=-1)
    starts = maxima.topk(count, dim=-1, sorted=False).indices * block
    windows = values.as_strided(((rows - 1) * row_stride + width - block + 1, block), (1, 1))
    offsets = (torch.arange(rows, device=values.device).unsqueeze(1) * row_stride + starts).reshape(-1)
    return windows.index_select(0, offsets).view(rows, count * block), starts


def residual_from_logits(logits: torch.Tensor, candidates: torch.Tensor, decoder_weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R₀, μ₀)`` by definition from the full epoch-1 logits (P, V) of one text's positions.

    ``R₀`` = log-sum-exp of the logits over ``V∖C`` (−inf when C is the whole vocabulary, μ₀ then 0);
    ``μ₀`` = the ``V∖C``-softmax-weighted mean of the output embeddings (rows of ``decoder_weight``).
    """
    outside = torch.ones(logits.shape[-1], dtype=torch.bool, device=logits.device)
    outside[candidates] = False
    if not outside.any():
        return torch.full(logits.shape[:1], float("-inf"), dtype=logits.dtype, device=logits.device), logits.new_zeros(logits.shape[0], decoder_weight.shape[1])
    rest = logits[:, outside]
    return torch.logsumexp(rest, dim=-1), torch.softmax(rest, dim=-1) @ decoder_weight[outside]


def residual_from_totals(
    log_normaliser: torch.Tensor, weighted_mean: torch.Tensor, candidate_logits: torch.Tensor, candidate_weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R₀, μ₀)`` from the full-vocabulary totals minus the candidates' share (no second pass over V).

    ``log_normaliser`` (…, P): logsumexp of the full epoch-1 logits; ``weighted_mean`` (…, P, H): the full
    softmax-weighted mean of the output embeddings; ``candidate_logits`` (…, P, C): the epoch-1 logits at
    the candidates (padding columns −inf); ``candidate_weight`` (…, C, H): their output embeddings. The
    leading dimensions (none, or one per text) broadcast.
    The outside mass ``s = 1 − Σ_C p`` is summed in float64; below :data:`MASS_FLOOR` it is float32
    rounding of the candidates' probabilities rather than mass, and the residual is −inf (μ₀ = 0). The subtraction's rounding in μ₀ is ~1e-7/s, but μ₀'s effect on
    the loss is weighted by the residual's probability ≈ s, so it stays ~1e-7.
    """
    candidate_probabilities = torch.exp(candidate_logits - log_normaliser[..., None])
    outside_mass = 1.0 - candidate_probabilities.double().sum(dim=-1)
    candidate_mean = candidate_probabilities @ candidate_weight
    present = outside_mass > MASS_FLOOR
    safe_mass = torch.where(present, outside_mass, torch.ones_like(outside_mass))
    residual = torch.where(present, log_normaliser.double() + torch.log(safe_mass), torch.full_like(safe_mass, float("-inf")))
    mean = (weighted_mean.double() - candidate_mean.double()) / safe_mass[..., None]
    mean = torch.where(present[..., None], mean, torch.zeros_like(mean))
    return residual.to(log_normaliser.dtype), mean.to(weighted_mean.dtype)


def residual_logit(z: torch.Tensor, z0: torch.Tensor, residual: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
    """The residual logit ``r = R₀ + (z − z₀)·μ₀`` of each position (first-order in z around z₀)."""
    return residual + ((z - z0) * mean).sum(dim=-1)


def candidate_cross_entropy(candidate_logits: torch.Tensor, residual: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-position cross-entropy over the candidates' logits (…, C) and the residual logit (…,).

    torch's cross-entropy (a fused log-softmax, and a fused backward) on the flattened positions;
    candidates padded with −inf logits get probability 0 and gradient 0.
    """
    logits = torch.cat([candidate_logits, residual.unsqueeze(-1)], dim=-1)
    losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return losses.view(targets.shape)


def pad_candidates(sets: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-text candidate ids padded to the longest set: ``(ids (T, C), valid (T, C))`` (padding id 0)."""
    width = max(len(ids) for ids in sets)
    padded = torch.zeros(len(sets), width, dtype=torch.long, device=sets[0].device)
    valid = torch.zeros(len(sets), width, dtype=torch.bool, device=sets[0].device)
    for row, ids in enumerate(sets):
        padded[row, : len(ids)] = ids
        valid[row, : len(ids)] = True
    return padded, valid
