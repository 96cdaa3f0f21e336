"""Micro-tuning many texts: inputs, groups sized for the device's memory, the reference or batched path.

:func:`embed_texts_variants` turns texts into micro-tuning inputs (:mod:`~embedlab.neural.inputs`), runs
them through the per-text reference path (:mod:`~embedlab.neural.reference`) or the batched path
(:mod:`~embedlab.neural.batched`) in groups planned from the memory budget (:mod:`~embedlab.neural.device`),
splitting a group that runs out of memory, and reads the embeddings off each run
(:mod:`~embedlab.neural.variants`). No caching here: the ``neural`` family (:mod:`~embedlab.neural.family`) caches.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from embedlab.errors import InputError
from embedlab.neural.batched import BatchedRun, micro_tune_batched
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.memo import memo
from embedlab.runtime.memory import trim_tuning_heap_if_grown
from embedlab.neural.device import (
    group_positions_for,
    is_out_of_memory,
    memory_budget,
    model_device,
    position_budget_for,
    release_device_memory,
)
from embedlab.neural.head import MaskedLM
from embedlab.neural.inputs import TextInputs, causal_text_inputs, text_inputs
from embedlab.neural.options import NeuralOptions, check_parameters
from embedlab.neural.reference import micro_tune_reference, text_seed
from embedlab.neural.variants import UNTUNED_VARIANTS, check_variants, hidden_variants, weight_change_embedding

PATHS = ("batched", "reference")
# A single text that runs out of memory is retried with halved logits slices down to this many positions.
MIN_POSITION_BUDGET = 16
_ON_DEVICE = memo("neural.masked_lm_on_device")


def masked_lm_on(masked_lm: MaskedLM, device) -> MaskedLM:
    """``masked_lm`` with its model on ``device``: the loaded (CPU) one itself, else a copy moved there once per process."""
    if model_device(masked_lm.model) == device:
        return masked_lm
    key = (masked_lm.name, str(masked_lm.path), masked_lm.head_hash, str(device))
    return _ON_DEVICE.get(key, lambda: replace(masked_lm, model=copy.deepcopy(masked_lm.model).to(device)))


def group_positions_of(masked_lm: MaskedLM, options: NeuralOptions, memory: str = "auto") -> int:
    """Masked positions per batched group on the model's device, from the memory budget (:mod:`~embedlab.neural.device`)."""
    device = model_device(masked_lm.model)
    vocabulary = masked_lm.model.get_output_embeddings().weight.shape[0]
    candidates = options.candidates if options.softmax == "candidates" else None
    return group_positions_for(memory_budget(device, memory), device, masked_lm.hidden_size, vocabulary, position_budget_for(device), candidates)


def _groups_by_positions(all_inputs: Sequence[TextInputs], group_positions: int) -> list[list[int]]:
    """Consecutive texts in groups of about ``group_positions`` masked positions (at least one text each)."""
    groups: list[list[int]] = []
    group: list[int] = []
    positions = 0
    for position, inputs in enumerate(all_inputs):
        count = inputs.masked_positions
        if group and positions + count > group_positions:
            groups.append(group)
            group, positions = [], 0
        group.append(position)
        positions += count
    if group:
        groups.append(group)
    return groups


def embed_texts(
    masked_lm: MaskedLM,
    texts: Sequence[str],
    options: NeuralOptions,
    path: str = "batched",
    group_positions: int | None = None,
    progress: Callable[[int], None] | None = None,
    indices: Sequence[int] | None = None,
    memory: str = "auto",
) -> np.ndarray:
    """Neural embeddings (or an Appendix G variant) of ``texts`` as float32 rows; no caching here.

    ``path``: ``batched`` (groups of texts with about ``group_positions`` masked positions together, by
    default as many as the ``memory`` budget allows on the model's device) or ``reference`` (one text at
    a time, CPU). ``indices`` name the texts in error messages.
    """
    vectors = embed_texts_variants(masked_lm, texts, options, (options.variant,), path, group_positions, progress, indices, memory)
    return vectors[options.variant]


def embed_texts_variants(
    masked_lm: MaskedLM,
    texts: Sequence[str],
    options: NeuralOptions,
    variants: Sequence[str],
    path: str = "batched",
    group_positions: int | None = None,
    progress: Callable[[int], None] | None = None,
    indices: Sequence[int] | None = None,
    memory: str = "auto",
    feature_store: ArrayStore | None = None,
) -> dict[str, np.ndarray]:
    """Several variants of ``texts`` from one micro-tuning run: ``{variant: float32 rows}``.

    ``options.variant`` is ignored; every name in ``variants`` is computed from the same tuned weights
    (``neural``: Eq. 1 on the weight changes; the others: Appendix G hidden-layer outputs).
    A group that runs out of memory is split in half and retried (:func:`_tune_splitting`); each text's
    loss and parameters are its own, so the split changes no embedding beyond float rounding.
    ``feature_store``: the batched path's frozen features are shared through it (:func:`~embedlab.neural.frozen.frozen_features`).
    """
    variants = tuple(dict.fromkeys(variants))
    _check_run(masked_lm, options, variants, path)
    hidden = [variant for variant in variants if variant != "neural"]
    device = model_device(masked_lm.model)
    indices = list(indices) if indices is not None else list(range(len(texts)))
    causal = masked_lm.layout is not None and masked_lm.layout.causal
    make_inputs = causal_text_inputs if causal else text_inputs
    all_inputs = [make_inputs(text, masked_lm.tokenizer, masked_lm.max_length, options.blueprints, f"text {index}") for text, index in zip(texts, indices)]
    if path == "reference":
        return {"neural": _embed_reference(masked_lm, texts, all_inputs, options, indices, progress)}
    needs_tuning = any(variant not in UNTUNED_VARIANTS for variant in variants)
    run_options = replace(options, epochs=options.epochs if needs_tuning else 0)  # the untuned variants need no tuning
    rows: dict[str, list[np.ndarray]] = {variant: [] for variant in variants}

    def read_off(members: list[int], run: BatchedRun) -> None:
        for local, member in enumerate(members):
            vectors = hidden_variants(run.top, run.frozen, local, hidden, run.replayed_states[local] if run.replayed_states else None) if hidden else {}
            if "neural" in variants:
                vectors["neural"] = weight_change_embedding(run.changes[local], f"text {indices[member]}")
            for variant in variants:
                rows[variant].append(vectors[variant].cpu().numpy().astype(np.float32))

    if group_positions is None:
        group_positions = group_positions_of(masked_lm, options, memory)
    for members in _groups_by_positions(all_inputs, group_positions):
        _tune_splitting(masked_lm, all_inputs, members, run_options, bool(hidden), position_budget_for(device), indices, read_off, feature_store)
        # Groups of long texts leave glibc's heap holding what they freed: SummEval's 2,746 texts grew the
        # process to 13.4 GB in 40 min, and one malloc_trim brought it back to 0.78 GB; trimmed once it has grown.
        trim_tuning_heap_if_grown()
        if progress:
            progress(len(members))
    return {variant: np.stack(found) for variant, found in rows.items()}


def _check_run(masked_lm: MaskedLM, options: NeuralOptions, variants: Sequence[str], path: str) -> None:
    """Refuse, before any work, what the path cannot do: unknown variants or parameters, hidden-layer variants,
    a lower compute or a GPU on the reference path."""
    check_variants(variants, options, masked_lm.num_layers, masked_lm.layout)
    check_parameters(masked_lm.model, options.params)
    if path not in PATHS:
        raise InputError(f"neural: path must be 'batched' or 'reference', got {path!r}")
    if path != "reference":
        return
    if any(variant != "neural" for variant in variants):
        raise InputError("neural: the hidden-layer variants are computed on the batched path only")
    if options.compute != "fp32":
        raise InputError(f"neural: dtype={options.compute} runs on the batched path; the reference path computes in fp32 (use path=batched or dtype=fp32)")
    device = model_device(masked_lm.model)
    if device.type != "cpu":
        raise InputError(f"neural: the reference path runs on the CPU; this model is on {device} (use path=batched or device=cpu)")


def _embed_reference(
    masked_lm: MaskedLM, texts: Sequence[str], all_inputs: Sequence[TextInputs], options: NeuralOptions, indices: Sequence[int],
    progress: Callable[[int], None] | None,
) -> np.ndarray:
    """The reference path: one text at a time with the real modules, each from its own seed."""
    results: list[np.ndarray] = []
    for text, inputs, index in zip(texts, all_inputs, indices):
        changes = micro_tune_reference(masked_lm, inputs, options, text_seed(options.seed, text))
        results.append(weight_change_embedding(changes, f"text {index}").numpy().astype(np.float32))
        if progress:
            progress(1)
    return np.stack(results) if results else np.zeros((0, 0), dtype=np.float32)


def _tune_splitting(
    masked_lm: MaskedLM, all_inputs: Sequence[TextInputs], members: list[int], options: NeuralOptions, need_plain: bool,
    position_budget: int, indices: Sequence[int], read_off: Callable[[list[int], BatchedRun], None], feature_store: ArrayStore | None = None,
) -> None:
    """Micro-tune ``members`` as one group and hand the run to ``read_off``; out of memory, halve and retry.

    A group that runs out of memory is split into its two halves (in order), each retried the same way;
    a single text that does not fit is retried with halved logits slices down to
    :data:`MIN_POSITION_BUDGET` positions, then refused with an error naming it. Each run is read off and
    dropped before the next starts, so the halves never hold memory together.
    """
    run: BatchedRun | None = None
    try:
        run = micro_tune_batched(masked_lm, [all_inputs[member] for member in members], options, position_budget=position_budget, need_plain=need_plain,
                                 store=feature_store)
    except (RuntimeError, MemoryError) as error:  # torch.OutOfMemoryError is a RuntimeError
        if not is_out_of_memory(error):
            raise
        failure = f"{type(error).__name__}: {error}"
    if run is None:  # retried outside the except clause, so the failed attempt's traceback (and its tensors) is gone
        device = model_device(masked_lm.model)
        release_device_memory(device)
        if len(members) > 1:
            half = len(members) // 2
            for part in (members[:half], members[half:]):
                _tune_splitting(masked_lm, all_inputs, part, options, need_plain, position_budget, indices, read_off, feature_store)
            return
        if position_budget > MIN_POSITION_BUDGET:
            _tune_splitting(masked_lm, all_inputs, members, options, need_plain, position_budget // 2, indices, read_off, feature_store)
            return
        raise MemoryError(
            f"neural: text {indices[members[0]]} ({all_inputs[members[0]].masked_positions} masked positions) does not fit in memory on {device} "
            f"even alone with {position_budget}-position logits slices ({failure}); free memory on that device or use device=cpu"
        )
    read_off(members, run)
    del run  # its features, logits and gradients are freed before the caller's trim


def embedding_width(masked_lm: MaskedLM, options: NeuralOptions) -> int:
    """Width of the embedding: the tuned vectors' total size (neural) or the hidden size (variants)."""
    if options.variant != "neural":
        return masked_lm.hidden_size
    parameters = dict(masked_lm.model.named_parameters())
    return int(sum(parameters[name].numel() for name in options.params))
