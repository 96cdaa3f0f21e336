"""The batched micro-tuning path: many texts at once, the same numbers as the reference path (paper Appendix B).

The tuned vectors this path covers (the head's ``transform.dense.bias`` / ``transform.LayerNorm.*`` and
a post-LN last block's ``output.dense.bias`` / ``output.LayerNorm.*``) all act position-wise *after*
everything that is frozen. So the frozen part runs once per text, only its outputs at the masked
positions (the only ones carrying a loss) are kept (:mod:`~embedlab.neural.frozen`), and each text owns
a row of every tuned vector (:class:`~embedlab.neural.top.BatchedTop`): :class:`BatchedAdamW` updates all
rows exactly as ``torch.optim.AdamW`` would update each text's own parameters. Each text's loss is its
own mean over its masked tokens, so texts do not interact, and the result equals
:func:`embedlab.neural.reference.micro_tune_reference` text by text. The last-block vectors of pre-LN
models (ModernBERT, causal LMs) and ALBERT's shared layer feed attention; there the module holding them
is re-run every epoch over all rows at once (:mod:`~embedlab.neural.replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from embedlab.errors import InputError
from embedlab.neural.adamw import BatchedAdamW
from embedlab.neural.candidate_epochs import GroupCandidates, first_epoch_with_candidates
from embedlab.neural.device import CPU_POSITION_BUDGET, full_float32
from embedlab.neural.frozen import FrozenFeatures, frozen_features
from embedlab.neural.head import MaskedLM
from embedlab.neural.inputs import TextInputs
from embedlab.neural.options import NeuralOptions, head_names
from embedlab.neural.replay import ReplayedModule
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.neural.top import BatchedTop, DenseAt
from embedlab.neural.vocabulary import VocabularyBuffers, model_lowered_decoder, softmax_terms

# gradients of one epoch for the tensors ``wrt``, given where the head's dense pre-activation comes from
EpochGradients = Callable[[DenseAt, list[torch.Tensor]], list[torch.Tensor]]


def batched_supported(names: Sequence[str], num_layers: int, layout=None) -> bool:
    """Whether the batched path covers this parameter choice: the head preset's vectors and the last-block preset's
    (post-LN blocks position-wise; pre-LN blocks and ALBERT's shared layer by re-running them, :mod:`~embedlab.neural.replay`)."""
    head, block = head_names(num_layers, layout)
    if layout is not None and not layout.block_batched and layout.replay_module is None:
        block = ()
    return all(name in head or name in block for name in names) and len(set(names)) == len(names)


@dataclass
class BatchedRun:
    """One batched micro-tuning run: each text's weight changes, and the state the Appendix G variants read."""

    changes: list[list[torch.Tensor]]  # per text, per tuned parameter (in ``options.params`` order)
    top: BatchedTop
    frozen: FrozenFeatures
    # per text, a replayed (pre-LN, ALBERT) model's hidden states of its unmasked rows: untuned (False) and tuned (True)
    replayed_states: list[dict[bool, list[torch.Tensor]]] | None = None


def micro_tune_batched(
    masked_lm: MaskedLM, group: list[TextInputs], options: NeuralOptions, position_budget: int = CPU_POSITION_BUDGET, need_plain: bool = False,
    store: ArrayStore | None = None,
) -> BatchedRun:
    """Micro-tune every text of ``group`` at once; returns each text's weight changes (in ``options.params`` order).

    Per epoch: one full-batch step per text (each text's loss is the mean over its own masked tokens, so
    the sum over texts has each text's gradient in its own rows), logits only at masked positions,
    computed in slices of ``position_budget`` positions with gradients accumulated. ``need_plain`` also
    keeps the unmasked texts' last-block inputs, which the hidden-layer variants read. With
    ``options.softmax == "candidates"`` epoch 1 also records each text's candidate set and residual terms
    and later epochs compute logits over those only (:class:`GroupCandidates`, :mod:`embedlab.neural.candidates`).

    256 positions were measured 12–19 % faster than 2,048 here, and 128 slower again (smaller matrix
    products); likely because each logits buffer (256 × 30,522 float32 ≈ 31 MB for BERT's vocabulary)
    then stays under glibc's 32 MB mmap threshold and is reused, instead of being mapped and
    zero-filled afresh for every slice.

    Runs on the model's device (:mod:`~embedlab.neural.device`): the frozen features, labels, owners,
    blueprint inputs, per-text rows and AdamW state are all created there, and the epochs read nothing
    back to the host; float32 products run at full precision (no TF32) throughout. ``options.compute`` other
    than fp32 runs the frozen forward and the vocabulary products in that dtype (:mod:`~embedlab.neural.vocabulary`).
    ``store``: the frozen features are read from and written to it (:func:`~embedlab.neural.frozen.frozen_features`).
    """
    with full_float32():
        return _micro_tune_batched(masked_lm, group, options, position_budget, need_plain, store)


def _micro_tune_batched(
    masked_lm: MaskedLM, group: list[TextInputs], options: NeuralOptions, position_budget: int, need_plain: bool, store: ArrayStore | None
) -> BatchedRun:
    if not batched_supported(options.params, masked_lm.num_layers, masked_lm.layout):
        raise InputError(f"neural: the batched path does not cover params {list(options.params)}; use the reference path")
    top = BatchedTop(masked_lm, options.params, len(group))
    replayed = ReplayedModule(masked_lm, group, top.tuned, top.original, need_plain=need_plain) if top.replay else None
    frozen = replayed.frozen if replayed is not None else frozen_features(masked_lm, group, top.block_mode, need_plain, compute=options.compute, store=store)
    weights = _loss_weights(frozen, len(group))
    lowered = model_lowered_decoder(masked_lm, options.compute)
    tuned = [top.tuned[name] for name in options.params]
    optimizer = BatchedAdamW(tuned, lr=options.learning_rate)
    candidates: GroupCandidates | None = None
    replayed_states: list[dict[bool, list[torch.Tensor]]] | None = None

    def epoch_gradients(dense_at: DenseAt, wrt: list[torch.Tensor]) -> list[torch.Tensor]:
        nonlocal candidates
        if candidates is not None:
            return candidates.gradients(top, dense_at, wrt)
        if options.softmax == "candidates":
            grads, candidates = first_epoch_with_candidates(top, frozen, dense_at, weights, wrt, options.candidates, position_budget, lowered)
            return grads
        if lowered is not None:
            return _lowered_exact_gradients(top, frozen, dense_at, weights, wrt, position_budget, lowered)
        return _exact_gradients(top, frozen, dense_at, weights, wrt, position_budget)

    try:
        step = _replayed_step(top, replayed, options.params) if replayed is not None else _fixed_step(top, frozen, tuned)
        for _ in range(options.epochs):
            optimizer.step(step(epoch_gradients))
        if replayed is not None and need_plain:  # Appendix G's variants: each text's rows replayed with its tuned vectors
            replayed_states = [{False: call.original, True: replayed.tuned_states(call)} for call in replayed.plain]
    finally:
        if replayed is not None:
            replayed.close()
    # one transfer per tuned vector after the last epoch (elementwise, so the same values as per text)
    deltas = {name: (top.tuned[name].detach() - top.original[name]).cpu() for name in options.params}
    changes = [[deltas[name][index].clone() for name in options.params] for index in range(len(group))]
    return BatchedRun(changes, top, frozen, replayed_states)


def _loss_weights(frozen: FrozenFeatures, texts: int) -> torch.Tensor:
    """Each masked position's loss weight: 1 / its text's positions, or (causal LMs) its multiplicity over the text's total."""
    if frozen.multiplicity is None:
        counts = torch.bincount(frozen.owner, minlength=texts).to(torch.float32)
        return 1.0 / counts[frozen.owner]
    totals = torch.bincount(frozen.owner, weights=frozen.multiplicity, minlength=texts).to(torch.float32)
    return frozen.multiplicity / totals[frozen.owner]


def _fixed_step(top: BatchedTop, frozen: FrozenFeatures, tuned: list[torch.Tensor]) -> Callable[[EpochGradients], list[torch.Tensor]]:
    """An epoch's gradients where the frozen features stay fixed (head vectors, post-LN block vectors)."""
    fixed_dense = None
    if not top.block_mode:  # the head's dense pre-activation does not change: computed once
        with torch.no_grad():
            fixed_dense = top.head_input(frozen.features, frozen.owner)

    def dense_at(positions: torch.Tensor | slice, owner: torch.Tensor) -> torch.Tensor:
        return fixed_dense[positions] if fixed_dense is not None else top.head_input(frozen.features[positions], owner)

    return lambda epoch_gradients: epoch_gradients(dense_at, tuned)


def _replayed_step(top: BatchedTop, replayed: ReplayedModule, names: Sequence[str]) -> Callable[[EpochGradients], list[torch.Tensor]]:
    """An epoch's gradients through the replayed module: the head's loss is taken against its output
    (a leaf), then that gradient flows back through the replay to the block's tuned rows."""
    head_names_tuned = [name for name in names if name in top.layout.head_vectors]
    block_names = [name for name in names if name not in head_names_tuned]

    def step(epoch_gradients: EpochGradients) -> list[torch.Tensor]:
        features = replayed.features()
        leaf = features.detach().requires_grad_(True)
        head_grads = epoch_gradients(lambda positions, owner: top.head_input(leaf[positions], owner), [top.tuned[name] for name in head_names_tuned] + [leaf])
        block_tensors = [top.tuned[name] for name in block_names]
        block_grads = torch.autograd.grad(features, block_tensors, grad_outputs=head_grads[-1], allow_unused=True)
        found = dict(zip(head_names_tuned, head_grads)) | {
            name: grad if grad is not None else torch.zeros_like(tensor) for name, tensor, grad in zip(block_names, block_tensors, block_grads)
        }
        return [found[name] for name in names]

    return step


def _exact_gradients(top: BatchedTop, frozen: FrozenFeatures, dense_at: DenseAt, weights: torch.Tensor, tuned: list[torch.Tensor], position_budget: int) -> list[torch.Tensor]:
    """One epoch's gradients with logits over the whole vocabulary, in slices of ``position_budget`` positions."""
    grads = [torch.zeros_like(tensor) for tensor in tuned]
    for start in range(0, len(frozen.labels), position_budget):
        piece = slice(start, start + position_budget)
        owner = frozen.owner[piece]
        logits = top.logits(dense_at(piece, owner), owner)
        losses = torch.nn.functional.cross_entropy(logits, frozen.labels[piece], reduction="none")
        piece_grads = torch.autograd.grad((losses * weights[piece]).sum(), tuned)
        for accumulated, grad in zip(grads, piece_grads):
            accumulated += grad
    return grads


def _lowered_exact_gradients(
    top: BatchedTop, frozen: FrozenFeatures, dense_at: DenseAt, weights: torch.Tensor, tuned: list[torch.Tensor], position_budget: int,
    lowered: torch.Tensor,
) -> list[torch.Tensor]:
    """:func:`_exact_gradients` with the two vocabulary products in a lower compute and the decoder's backward
    written out (:mod:`~embedlab.neural.vocabulary`); the gradient through the head transform stays float32."""
    grads = [torch.zeros_like(tensor) for tensor in tuned]
    buffers = VocabularyBuffers()  # one set of logits buffers for every slice
    for start in range(0, len(frozen.labels), position_budget):
        piece = slice(start, start + position_budget)
        owner = frozen.owner[piece]
        z = top.transformed(dense_at(piece, owner), owner)
        _, _, mean = softmax_terms(z.detach(), top.decoder_weight, top.output_bias, lowered, buffers=buffers)
        with torch.no_grad():
            grad_z = (mean - top.decoder_weight[frozen.labels[piece]]) * weights[piece, None]
        for accumulated, grad in zip(grads, torch.autograd.grad(z, tuned, grad_outputs=grad_z)):
            accumulated += grad
    return grads
