"""What one micro-tuning run is: the tuned 1-D parameters and the options around them.

The tuned parameters (neural-embeddings paper §2, Appendix A and G): by default the three vectors of the
masked-LM head's transform (L0 = LayerNorm weight, L1 = LayerNorm bias, L2 = dense bias); Appendix G
tunes the last transformer block's output vectors instead ("block 11" of BERT-base = the model's last
block). Any other 1-D parameters can be named explicitly (the reference path covers them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from embedlab.errors import InputError
from embedlab.neural.inputs import BLUEPRINTS

HEAD_VECTORS = (
    "cls.predictions.transform.LayerNorm.weight",  # L0
    "cls.predictions.transform.LayerNorm.bias",  # L1
    "cls.predictions.transform.dense.bias",  # L2
)


def block_vectors(num_layers: int) -> tuple[str, str, str]:
    """The last transformer block's output LayerNorm weight/bias and output dense bias (Appendix A, G)."""
    prefix = f"bert.encoder.layer.{num_layers - 1}.output."
    return (prefix + "LayerNorm.weight", prefix + "LayerNorm.bias", prefix + "dense.bias")


def head_names(num_layers: int, layout=None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The model's head preset and last-block preset: from its head layout (:mod:`~embedlab.neural.adapters`), BERT's without one."""
    if layout is None:
        return HEAD_VECTORS, block_vectors(num_layers)
    return layout.head_vectors, layout.block_vectors


def tunes_last_block(names: Sequence[str], num_layers: int, layout=None) -> bool:
    """Whether any of ``names`` is one of the last block's output vectors (what the tuned variants read)."""
    block = head_names(num_layers, layout)[1]
    return any(name in block for name in names)


def resolve_parameter_names(spec: str, num_layers: int, layout=None) -> list[str]:
    """Parameter names from a preset (``head``, ``block``, ``block-dense-bias``) or ``;``-separated names.

    The presets come from the model's head layout (BERT's names without one). In explicit names a
    path segment ``last`` stands for the model's last block (``bert.encoder.layer.last.…`` = BERT-base's "block 11").
    """
    head, block = head_names(num_layers, layout)
    if spec == "block-dense-bias" and layout is not None and not layout.block_batched:
        raise InputError(f"neural: params=block-dense-bias names a post-LN block's output dense bias; {layout.family} has none (use params=block)")
    presets = {
        "head": list(head),
        "block": list(block),
        "block-dense-bias": list(block[2:3]),  # Appendix G's neural-1
    }
    if spec in presets:
        return presets[spec]
    last = str(num_layers - 1)
    names = [".".join(last if part == "last" else part for part in name.strip().split(".")) for name in spec.split(";") if name.strip()]
    if not names:
        raise InputError(f"neural: params={spec!r} names no parameter")
    return names


def check_parameters(model: torch.nn.Module, names: Sequence[str]) -> dict[str, torch.nn.Parameter]:
    """The model's parameters called ``names``; a clear error for a missing, repeated or non-1-D one."""
    available = dict(model.named_parameters())
    chosen = {}
    for name in names:
        if name not in available:
            close = [candidate for candidate in available if candidate.endswith(name.split(".")[-1])][:6]
            raise InputError(f"neural: model has no parameter {name!r} (parameters ending alike: {close})")
        if available[name].dim() != 1:
            raise InputError(f"neural: parameter {name!r} has shape {tuple(available[name].shape)}; only 1-D parameters are micro-tuned")
        chosen[name] = available[name]
    if len(set(names)) != len(names):
        raise InputError(f"neural: parameter names repeat: {list(names)}")
    return chosen


@dataclass(frozen=True)
class NeuralOptions:
    """What determines a neural embedding besides the model, its head and the text."""

    params: tuple[str, ...]
    epochs: int = 10
    learning_rate: float = 1e-2
    blueprints: tuple[tuple[int, int], ...] = BLUEPRINTS
    variant: str = "neural"
    seed: int = 0
    softmax: str = "exact"  # or "candidates": epoch 1 exact, then each text's candidate set (neural.candidates)
    candidates: int = 256  # top-K per masked position forming the candidate set (softmax="candidates" only)
    compute: str = "fp32"  # the frozen forward's and the vocabulary products' dtype (neural.vocabulary); resolved, never "auto"

    def key(self) -> dict:
        """The options as JSON-ready values: part of every cached embedding's key.

        The candidate-set softmax and a compute other than fp32 enter the key only when chosen, so exact
        fp32 embeddings keep their keys.
        """
        key = {
            "params": list(self.params),
            "epochs": self.epochs,
            "lr": self.learning_rate,
            "blueprints": [list(b) for b in self.blueprints],
            "variant": self.variant,
            "seed": self.seed,
        }
        if self.softmax != "exact":
            key.update(softmax=self.softmax, candidates=self.candidates)
        if self.compute != "fp32":
            key.update(compute=self.compute)
        return key
