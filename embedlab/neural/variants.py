"""What is read off a micro-tuning run: Eq. 1's neural embedding and Appendix G's hidden-layer variants.

* ``neural`` (§2, Eq. 1): each tuned layer's weight change normalised, concatenated, normalised again.
* Appendix G: the last block's output for the unmasked text, as its ``[CLS]`` state (``cls``) or token
  average (``avg``); of the original model (``cls``, ``avg``: no micro-tuning needed), of the tuned one
  (``*-tuned``), or their difference (``*-diff``). They need the last block tuned (``params=block``).
  On a post-LN encoder the block's tuned vectors act after everything frozen; on a pre-LN block or ALBERT's
  shared layer the replayed module is re-run with them (:mod:`~embedlab.neural.replay`), so the variants
  read the model's last hidden states either way. A causal LM has no ``cls``: its first token has seen
  only itself.

One batched run that tunes the last block yields all seven at once (:func:`shared_run_variants`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from embedlab.errors import InputError
from embedlab.neural.batched import batched_supported
from embedlab.neural.frozen import FrozenFeatures
from embedlab.neural.top import BatchedTop
from embedlab.neural.options import NeuralOptions, tunes_last_block

VARIANTS = ("neural", "cls", "avg", "cls-tuned", "avg-tuned", "cls-diff", "avg-diff")
UNTUNED_VARIANTS = ("cls", "avg")  # the original model's outputs: no micro-tuning needed


def weight_change_embedding(changes: Sequence[torch.Tensor], where: str = "") -> torch.Tensor:
    """Eq. 1: each layer's weight change normalised, concatenated, and the result normalised."""
    parts = []
    for change in changes:
        norm = change.norm()
        if not torch.isfinite(norm) or float(norm) == 0.0:
            raise ValueError(f"{where}: micro-tuning left a tuned layer unchanged (norm {float(norm)}); cannot normalise")
        parts.append(change / norm)
    joined = torch.cat(parts)
    return joined / joined.norm()


def check_variants(variants: Sequence[str], options: NeuralOptions, num_layers: int, layout=None) -> None:
    """Raise unless every name is a variant and the tuned ones can be read off a run with ``options``."""
    for variant in variants:
        if variant not in VARIANTS:
            raise InputError(f"neural: unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    hidden = [variant for variant in variants if variant != "neural"]
    if hidden and layout is not None and not layout.block_batched and layout.replay_module is None:
        raise InputError(f"neural: variant {hidden[0]!r} reads the last block's output (Appendix G); {layout.family}'s is not reachable, so only variant=neural runs")
    first_token = [variant for variant in hidden if variant.startswith("cls")]
    if first_token and layout is not None and layout.causal:
        raise InputError(f"neural: variant {first_token[0]!r} reads the first token's state, which in causal LM {layout.family} has seen only "
                         "itself (Appendix G's [CLS] has seen the whole text); use avg, avg-tuned or avg-diff")
    reading_tuned_block = [variant for variant in variants if variant != "neural" and variant not in UNTUNED_VARIANTS]
    if reading_tuned_block and not tunes_last_block(options.params, num_layers, layout):
        raise InputError(
            f"neural: variant {reading_tuned_block[0]!r} reads the last block's output, so params must tune the last block (e.g. params=block)"
        )


def readable_variants(layout=None) -> tuple[str, ...]:
    """The variants a model with ``layout`` has: all but the ``cls`` ones on a causal LM (see :func:`check_variants`)."""
    if layout is not None and layout.causal:
        return tuple(variant for variant in VARIANTS if not variant.startswith("cls"))
    return VARIANTS


def hidden_variants(top: BatchedTop, frozen: FrozenFeatures, index: int, variants: Sequence[str],
                    replayed: dict[bool, list[torch.Tensor]] | None = None) -> dict[str, torch.Tensor]:
    """Appendix G: last-block output of the unmasked text ([CLS] or token average), original/tuned/difference.

    Chunks of a long text: the [CLS] vectors are averaged over chunks; the token average runs over all
    tokens ([CLS]/[SEP] included, as sentence-transformers' mean pooling) of all chunks. The chunks'
    original and tuned states are computed once and shared by all requested variants. ``replayed``: a
    pre-LN or ALBERT model's states, per row of real tokens, untuned (False) and tuned (True), from
    re-running the replayed module (:meth:`~embedlab.neural.replay.ReplayedModule.tuned_states`); they
    are the model's last hidden states (a causal LM's after its final norm), BOS included.
    """
    chunk_states: dict[bool, list[torch.Tensor]] = dict(replayed) if replayed is not None else {}

    def states_of(tuned: bool) -> list[torch.Tensor]:
        if tuned not in chunk_states:
            features, mask = frozen.plain[index], frozen.plain_mask[index]
            owner = torch.full(features.shape[:1], index, dtype=torch.long, device=features.device)
            outputs = []
            for row in range(features.shape[0]):
                tokens = features[row][mask[row]]
                if tuned:
                    outputs.append(top.block_output(tokens, owner[row].expand(tokens.shape[0])))
                else:
                    outputs.append(top.original_block_output(tokens))
            chunk_states[tuned] = outputs
        return chunk_states[tuned]

    def pooled(kind: str, tuned: bool) -> torch.Tensor:
        outputs = states_of(tuned)
        if kind == "cls":
            return torch.stack([states[0] for states in outputs]).mean(dim=0)
        return torch.cat(outputs).mean(dim=0)

    result: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for variant in variants:
            kind, _, stage = variant.partition("-")
            if stage == "":
                result[variant] = pooled(kind, False)
            elif stage == "tuned":
                result[variant] = pooled(kind, True)
            else:
                result[variant] = pooled(kind, True) - pooled(kind, False)
    return result


def shared_run_variants(options: NeuralOptions, num_layers: int, layout=None) -> tuple[str, ...]:
    """Variants one batched micro-tuning run with ``options`` yields besides its own (Appendix G).

    When the last block is tuned, the neural embedding and all six hidden-layer variants come from the same
    tuned weights, so one run gives all seven; ``cls`` and ``avg`` need no tuning and give each other;
    otherwise only the requested variant.
    """
    readable = readable_variants(layout)
    if options.variant in UNTUNED_VARIANTS:  # no micro-tuning run to share beyond the other untuned one
        return tuple(variant for variant in UNTUNED_VARIANTS if variant in readable)
    if layout is not None and not layout.block_batched and layout.replay_module is None:
        return (options.variant,)
    if batched_supported(options.params, num_layers, layout) and tunes_last_block(options.params, num_layers, layout):
        return readable
    return (options.variant,)
