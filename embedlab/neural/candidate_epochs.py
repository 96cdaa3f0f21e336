"""The candidate-set epochs of the batched path: epoch 1 exact, then each text's candidates plus a residual logit.

The math (candidate sets, the residual logit R₀ + (z − z₀)·μ₀, the candidate cross-entropy) lives in
:mod:`embedlab.neural.candidates`; this module lays it out for many texts at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from embedlab.neural.candidates import (
    candidate_cross_entropy,
    candidate_sets,
    pad_candidates,
    residual_from_totals,
    residual_logit,
)
from embedlab.neural.device import chunking_for
from embedlab.neural.frozen import FrozenFeatures
from embedlab.neural.top import BatchedTop, DenseAt
from embedlab.neural.vocabulary import VocabularyBuffers, softmax_terms


def first_epoch_with_candidates(
    top: BatchedTop, frozen: FrozenFeatures, dense_at: DenseAt, weights: torch.Tensor, tuned: list[torch.Tensor], count: int, position_budget: int,
    lowered: torch.Tensor | None = None,
) -> tuple[list[torch.Tensor], GroupCandidates]:
    """Epoch 1 exactly, keeping what the candidate epochs need (top-K ids, z₀, log-sum-exp, softmax mean).

    The decoder's backward is written out: ``∂CE/∂z = (Σ_v p_v·W_v − W_y)·weight``, whose first term is
    the full softmax-weighted mean μ_all that the residual needs, so epoch 1 costs what an exact epoch does
    (:func:`~embedlab.neural.vocabulary.softmax_terms`; ``lowered``: its two vocabulary products in a lower compute).
    """
    grads = [torch.zeros_like(tensor) for tensor in tuned]
    first_z, normalisers, means, tops = [], [], [], []
    buffers = VocabularyBuffers()  # one set of logits buffers for every slice
    for start in range(0, len(frozen.labels), position_budget):
        piece = slice(start, start + position_budget)
        owner = frozen.owner[piece]
        z = top.transformed(dense_at(piece, owner), owner)
        ids, normaliser, mean = softmax_terms(z.detach(), top.decoder_weight, top.output_bias, lowered, count, buffers)
        with torch.no_grad():
            grad_z = (mean - top.decoder_weight[frozen.labels[piece]]) * weights[piece, None]
        piece_grads = torch.autograd.grad(z, tuned, grad_outputs=grad_z)
        for accumulated, grad in zip(grads, piece_grads):
            accumulated += grad
        first_z.append(z.detach())
        normalisers.append(normaliser)
        means.append(mean)
        tops.append(ids)
    state = GroupCandidates(top, frozen, weights, torch.cat(tops), torch.cat(first_z), torch.cat(normalisers), torch.cat(means),
                            lowered.dtype if lowered is not None else None)
    return grads, state


@dataclass
class CandidateChunk:
    """Texts whose candidate epochs run as one batched matmul: per-text candidates and positions, padded.

    Padding positions repeat the text's first position with weight 0; padding candidates have bias −inf.
    """

    texts: torch.Tensor  # (T, 1) the texts' indices in the group: one row of every tuned vector per text
    weight: torch.Tensor  # (T, C, H) output embeddings of the candidates (gathered once, reused every epoch)
    bias: torch.Tensor  # (T, C) output bias at the candidates, −inf at padding
    positions: torch.Tensor  # (T, P) group positions, padded with the text's first position
    weights: torch.Tensor  # (T, P) each position's loss weight (1 / the text's masked positions; 0 at padding)
    targets: torch.Tensor  # (T, P) each label's column among its text's candidates
    z0: torch.Tensor  # (T, P, H) epoch-1 decoder inputs
    residual: torch.Tensor  # (T, P) R₀
    mean: torch.Tensor  # (T, P, H) μ₀
    lowered_weight: torch.Tensor | None = None  # ``weight`` in a lower compute (dtype=bf16|fp16): the epochs' logits products read it


def chunk_texts(positions: Sequence[int], sizes: Sequence[int], hidden: int, padding_slack: float = 1.25, chunk_values: int = 1 << 24) -> list[list[int]]:
    """Texts cut into chunks for the padded candidate epochs, given each text's masked positions and set size.

    A chunk's work is (texts × its most positions × its largest set); whatever exceeds the texts' own
    positions × set sizes is padding, wasted. Texts are sorted by (positions, set size), which a text's
    length drives both of, and a chunk is closed when the next text would make its padded work exceed
    ``padding_slack`` × its real work (each chunk costs a few dozen small operations per epoch, so
    chunks of one text each would cost more than they save) or its gathered output embeddings exceed
    ``chunk_values`` values.
    """
    order = sorted(range(len(positions)), key=lambda text: (positions[text], sizes[text]))
    chunks: list[list[int]] = []
    chunk: list[int] = []
    real = largest = 0
    for text in order:  # positions ascend, so the text's own are the chunk's most
        work = positions[text] * sizes[text]
        widest = max(largest, sizes[text])
        if chunk and ((len(chunk) + 1) * positions[text] * widest > padding_slack * (real + work) or (len(chunk) + 1) * widest * hidden > chunk_values):
            chunks.append(chunk)
            chunk, real, widest = [], 0, sizes[text]
        chunk.append(text)
        real += work
        largest = widest
    if chunk:
        chunks.append(chunk)
    return chunks


class GroupCandidates:
    """A group's candidate sets (each text its own) and residual terms, built from epoch 1.

    Texts are cut into chunks of similar positions and set sizes (:func:`chunk_texts`), so padding to a
    chunk's largest text wastes little.
    """

    def __init__(
        self, top: BatchedTop, frozen: FrozenFeatures, weights: torch.Tensor, tops: torch.Tensor, z0: torch.Tensor,
        normalisers: torch.Tensor, means: torch.Tensor, lowered: torch.dtype | None = None,
    ) -> None:
        # built once after epoch 1: the sizes read back here (.tolist) are its only host round trips
        device = frozen.owner.device
        positions_of = torch.split(torch.arange(len(frozen.owner), device=device), torch.bincount(frozen.owner, minlength=top.texts).tolist())  # texts are contiguous
        sets, targets = candidate_sets(tops, frozen.labels, frozen.owner, top.texts)
        groups = chunk_texts([len(positions) for positions in positions_of], [len(ids) for ids in sets], top.decoder_weight.shape[1], *chunking_for(device))
        self.chunks = [self._chunk(texts, sets, targets, positions_of, top, weights, z0, normalisers, means) for texts in groups]
        if lowered is not None:
            for chunk in self.chunks:
                chunk.lowered_weight = chunk.weight.to(lowered)

    @staticmethod
    def _chunk(
        texts: list[int], sets: list[torch.Tensor], targets: torch.Tensor, positions_of: Sequence[torch.Tensor], top: BatchedTop,
        weights: torch.Tensor, z0: torch.Tensor, normalisers: torch.Tensor, means: torch.Tensor,
    ) -> CandidateChunk:
        """One chunk's padded tensors, its epoch-1 candidate logits and its residual terms R₀, μ₀."""
        ids, valid = pad_candidates([sets[text] for text in texts])
        width = max(len(positions_of[text]) for text in texts)
        positions = torch.stack([torch.cat([positions_of[text], positions_of[text][:1].expand(width - len(positions_of[text]))]) for text in texts])
        real = torch.stack([torch.arange(width, device=z0.device) < len(positions_of[text]) for text in texts])
        bias = top.output_bias[ids].masked_fill(~valid, float("-inf"))
        first_z = z0[positions]
        with torch.no_grad():
            weight = top.decoder_weight[ids]
            first_logits = torch.baddbmm(bias.unsqueeze(1), first_z, weight.transpose(1, 2))
            residual, mean = residual_from_totals(normalisers[positions], means[positions], first_logits, weight)
        return CandidateChunk(torch.tensor(texts, device=z0.device).unsqueeze(1), weight, bias, positions, weights[positions] * real, targets[positions], first_z, residual, mean)

    def gradients(self, top: BatchedTop, dense_at: DenseAt, tuned: list[torch.Tensor]) -> list[torch.Tensor]:
        """One candidate epoch's gradients: logits over each text's own candidates plus the residual logit.

        Each chunk stays in its (texts, positions) layout: a text's tuned rows are taken once and
        broadcast over its positions, rather than once per position.
        """
        grads = [torch.zeros_like(tensor) for tensor in tuned]
        for chunk in self.chunks:
            z = top.transformed(dense_at(chunk.positions, chunk.texts), chunk.texts)
            if chunk.lowered_weight is None:
                logits = torch.baddbmm(chunk.bias.unsqueeze(1), z, chunk.weight.transpose(1, 2))
            else:  # the product in the lower compute, its result (and the gradient it passes back to z) float32 at once
                logits = torch.bmm(z.to(chunk.lowered_weight.dtype), chunk.lowered_weight.transpose(1, 2)).float() + chunk.bias.unsqueeze(1)
            losses = candidate_cross_entropy(logits, residual_logit(z, chunk.z0, chunk.residual, chunk.mean), chunk.targets)
            chunk_grads = torch.autograd.grad((losses * chunk.weights).sum(), tuned)
            for accumulated, grad in zip(grads, chunk_grads):
                accumulated += grad
        return grads
