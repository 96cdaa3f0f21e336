"""The ``neural`` method family: neural embeddings (paper §2, Eq. 1) and their Appendix C/G variants as specs.

Examples::

    neural:minilm                              # 3 head vectors (L0, L1, L2), 10 epochs, lr 1e-2: width 3 x 384
    neural:minilm,head=untrained               # the same with BERT's untrained head initialisation
    neural:minilm,params=block,epochs=5        # the last block's output vectors (Appendix G's "neural")
    neural:minilm,params=block-dense-bias      # Appendix G's neural-1
    neural:minilm,params=block,variant=cls-diff,epochs=5   # Appendix G hidden-layer variants
    neural:minilm,skip-layer=2                 # Appendix C.1 ablation Neural-L2
    neural:minilm,skip-blueprint=1             # Appendix C.2 ablation Neural-B1
    neural:minilm,softmax=candidates           # issue 18: epoch 1 exact, then candidate sets (K=256): cheaper, near-exact
    neural:minilm+minilm                       # Appendix H: normalised concatenation (the spec parser's '+')
    neural:minilm,device=cuda,memory=8GB       # the batched path on a GPU, groups planned for 8 GB

This module orchestrates the parts: inputs (:mod:`~embedlab.neural.inputs`), the reference and batched
micro-tuning paths (:mod:`~embedlab.neural.reference`, :mod:`~embedlab.neural.batched`) and what is read
off a run (:mod:`~embedlab.neural.variants`). Embeddings are cached per text in the runtime's
``ArrayStore("neural")`` (checksummed), keyed by the model fingerprint, the head hash, the options, the
path and the text, so reruns never micro-tune a text twice. A run that tunes the last block caches the
neural embedding and all six hidden-layer variants of its texts at once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch

from embedlab import runtime
from embedlab.errors import InputError
from embedlab.methods.base import Family, VectorMethod
from embedlab.neural.batched import BatchedRun, batched_supported, micro_tune_batched
from embedlab.neural.candidates import SOFTMAX_MODES
from embedlab.neural.device import (
    DEVICES_HELP,
    check_device,
    check_memory,
    group_positions_for,
    is_out_of_memory,
    memory_budget,
    model_device,
    position_budget_for,
    release_device_memory,
    resolve_device,
)
from embedlab.neural.head import MaskedLM, load_masked_lm
from embedlab.neural.inputs import BLUEPRINTS, TextInputs, causal_text_inputs, text_inputs
from embedlab.neural.options import HEAD_VECTORS, NeuralOptions, check_parameters, resolve_parameter_names
from embedlab.neural.reference import micro_tune_reference, text_seed
from embedlab.neural.variants import (
    UNTUNED_VARIANTS,
    VARIANTS,
    check_variants,
    hidden_variants,
    shared_run_variants,
    weight_change_embedding,
)
from embedlab.runtime import ArrayStore, cache_key
from embedlab.spec import Option, finite_number, whole_number

# Texts micro-tuned per call of the batched path before their embeddings are cached; large enough
# that the batched path's groups (about 4,096 masked positions, 100-200 sentences) stay full.
CACHE_SLICE = 512
PATHS = ("batched", "reference")
# A single text that runs out of memory is retried with halved logits slices down to this many positions.
MIN_POSITION_BUDGET = 16
_ON_DEVICE = runtime.memo("neural.masked_lm_on_device")


def _index_or_none(limit: int) -> Callable[[str], str]:
    def validate(value: str) -> str:
        if value == "none":
            return value
        if not value.isdigit() or int(value) >= limit:
            raise ValueError(f"must be 'none' or an index 0..{limit - 1}")
        return str(int(value))

    return validate


NEURAL_OPTIONS: dict[str, Option] = {
    "params": Option("head", help="tuned 1-D parameters: head (L0,L1,L2 of the head transform), block (last block's output vectors), "
                     "block-dense-bias (neural-1), or names joined by ';' ('layer.last.' = last block)"),
    "epochs": Option("10", help="micro-tuning epochs (one full-batch AdamW step each)", validate=whole_number(0)),
    "lr": Option("0.01", help="AdamW learning rate (other AdamW settings are torch defaults)", validate=finite_number(positive=True)),
    "head": Option("auto", help="masked-LM head: auto (checkpoint's own, else the shipped trained one), untrained, or a head file"),
    "skip-layer": Option("none", help="ablation Neural-L<i>: leave out tuned layer i (Appendix C.1)", validate=_index_or_none(len(HEAD_VECTORS))),  # every preset tunes three layers
    "skip-blueprint": Option("none", help="ablation Neural-B<i>: leave out masking blueprint i of [(2,1),(1,1),(1,2),(1,3)] (Appendix C.2)",
                             validate=_index_or_none(len(BLUEPRINTS))),
    "variant": Option("neural", choices=VARIANTS,
                      help="neural (Eq. 1) or an Appendix G hidden-layer variant: cls, avg, cls-tuned, avg-tuned, cls-diff, avg-diff"),
    "path": Option("auto", choices=("auto", *PATHS), help="auto, batched (many texts at once) or reference (one text at a time, any parameters)"),
    "seed": Option("0", help="seed (per-text seeds derive from it and the text)", validate=whole_number(0)),
    "softmax": Option("exact", choices=SOFTMAX_MODES,
                      help="exact (logits over the whole vocabulary every epoch) or candidates (epoch 1 exact, then each text's "
                           "candidate set plus one first-order residual logit: several times cheaper, near-exact; see docs/neural.md)"),
    "candidates": Option("256", help="softmax=candidates: top-K tokens per masked position (from epoch 1) forming a text's candidate set",
                         validate=whole_number(1)),
    "device": Option("auto", help=f"where the batched path runs: {DEVICES_HELP} (the reference path runs on the CPU)", validate=check_device),
    "memory": Option("auto", help="memory a batched group plans for: auto (CUDA: half the free device memory; CPU: the default group "
                     "size) or a size such as 512MB or 2GB; a group that still runs out is split in half and retried", validate=check_memory),
}


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
) -> dict[str, np.ndarray]:
    """Several variants of ``texts`` from one micro-tuning run: ``{variant: float32 rows}``.

    ``options.variant`` is ignored; every name in ``variants`` is computed from the same tuned weights
    (``neural``: Eq. 1 on the weight changes; the others: Appendix G hidden-layer outputs).
    A group that runs out of memory is split in half and retried (:func:`_tune_splitting`); each text's
    loss and parameters are its own, so the split changes no embedding beyond float rounding.
    """
    variants = tuple(dict.fromkeys(variants))
    check_variants(variants, options, masked_lm.num_layers, masked_lm.layout)
    check_parameters(masked_lm.model, options.params)
    if path not in PATHS:
        raise InputError(f"neural: path must be 'batched' or 'reference', got {path!r}")
    hidden = [variant for variant in variants if variant != "neural"]
    if hidden and path == "reference":
        raise InputError("neural: the hidden-layer variants are computed on the batched path only")
    device = model_device(masked_lm.model)
    if path == "reference" and device.type != "cpu":
        raise InputError(f"neural: the reference path runs on the CPU; this model is on {device} (use path=batched or device=cpu)")
    indices = list(indices) if indices is not None else list(range(len(texts)))
    causal = masked_lm.layout is not None and masked_lm.layout.causal
    make_inputs = causal_text_inputs if causal else text_inputs
    all_inputs = [make_inputs(text, masked_lm.tokenizer, masked_lm.max_length, options.blueprints, f"text {index}") for text, index in zip(texts, indices)]
    if path == "reference":
        results: list[np.ndarray] = []
        for text, inputs, index in zip(texts, all_inputs, indices):
            changes = micro_tune_reference(masked_lm, inputs, options, text_seed(options.seed, text))
            results.append(weight_change_embedding(changes, f"text {index}").numpy().astype(np.float32))
            if progress:
                progress(1)
        return {"neural": np.stack(results) if results else np.zeros((0, 0), dtype=np.float32)}
    needs_tuning = any(variant not in UNTUNED_VARIANTS for variant in variants)
    run_options = replace(options, epochs=options.epochs if needs_tuning else 0)  # the untuned variants need no tuning
    rows: dict[str, list[np.ndarray]] = {variant: [] for variant in variants}

    def read_off(members: list[int], run: BatchedRun) -> None:
        for local, member in enumerate(members):
            vectors = hidden_variants(run.top, run.frozen, local, hidden) if hidden else {}
            if "neural" in variants:
                vectors["neural"] = weight_change_embedding(run.changes[local], f"text {indices[member]}")
            for variant in variants:
                rows[variant].append(vectors[variant].cpu().numpy().astype(np.float32))

    if group_positions is None:
        group_positions = group_positions_of(masked_lm, options, memory)
    for members in _groups_by_positions(all_inputs, group_positions):
        _tune_splitting(masked_lm, all_inputs, members, run_options, bool(hidden), position_budget_for(device), indices, read_off)
        # Groups of long texts leave glibc's heap holding what they freed: SummEval's 2,746 texts grew the
        # process to 13.4 GB in 40 min, and one malloc_trim brought it back to 0.78 GB (see the function).
        runtime.release_free_memory()
        if progress:
            progress(len(members))
    return {variant: np.stack(found) for variant, found in rows.items()}


def _tune_splitting(
    masked_lm: MaskedLM, all_inputs: Sequence[TextInputs], members: list[int], options: NeuralOptions, need_plain: bool,
    position_budget: int, indices: Sequence[int], read_off: Callable[[list[int], BatchedRun], None],
) -> None:
    """Micro-tune ``members`` as one group and hand the run to ``read_off``; out of memory, halve and retry.

    A group that runs out of memory is split into its two halves (in order), each retried the same way;
    a single text that does not fit is retried with halved logits slices down to
    :data:`MIN_POSITION_BUDGET` positions, then refused with an error naming it. Each run is read off and
    dropped before the next starts, so the halves never hold memory together.
    """
    run: BatchedRun | None = None
    try:
        run = micro_tune_batched(masked_lm, [all_inputs[member] for member in members], options, position_budget=position_budget, need_plain=need_plain)
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
                _tune_splitting(masked_lm, all_inputs, part, options, need_plain, position_budget, indices, read_off)
            return
        if position_budget > MIN_POSITION_BUDGET:
            _tune_splitting(masked_lm, all_inputs, members, options, need_plain, position_budget // 2, indices, read_off)
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


class NeuralEmbedder:
    """Neural embeddings of texts for one model, head and option set, with a per-text disk cache.

    ``options`` are the family's option strings (:data:`NEURAL_OPTIONS`), validated the same way as in a spec.
    """

    def __init__(self, model: str, options: dict[str, str] | None = None, use_cache: bool = True) -> None:
        unknown = set(options or {}) - set(NEURAL_OPTIONS)
        if unknown:
            raise InputError(f"neural: unknown option(s) {sorted(unknown)}; valid: {', '.join(NEURAL_OPTIONS)}")
        given = options or {}
        self.values = {key: option.canonical(key, given[key]) if key in given else option.default for key, option in NEURAL_OPTIONS.items()}
        self.model_name = model
        self.use_cache = use_cache
        self.store = ArrayStore("neural")
        self._masked_lm: MaskedLM | None = None
        self._options: NeuralOptions | None = None

    @property
    def masked_lm(self) -> MaskedLM:
        if self._masked_lm is None:
            self._masked_lm = load_masked_lm(self.model_name, head=self.values["head"])
        return self._masked_lm

    @property
    def options(self) -> NeuralOptions:
        if self._options is None:
            self._options = self._resolve_options()
        return self._options

    def _resolve_options(self) -> NeuralOptions:
        """The option strings as a :class:`NeuralOptions` for this model (presets and ablations applied)."""
        values = self.values
        names = resolve_parameter_names(values["params"], self.masked_lm.num_layers, self.masked_lm.layout)
        if values["skip-layer"] != "none":
            skip = int(values["skip-layer"])
            if skip >= len(names) or len(names) == 1:
                raise InputError(f"neural: skip-layer={skip} needs at least {max(skip + 1, 2)} tuned layers, params has {len(names)}")
            names = [name for index, name in enumerate(names) if index != skip]
        blueprints = BLUEPRINTS
        if values["skip-blueprint"] != "none":
            skip = int(values["skip-blueprint"])
            blueprints = tuple(blueprint for index, blueprint in enumerate(BLUEPRINTS) if index != skip)
        return NeuralOptions(
            params=tuple(names),
            epochs=int(values["epochs"]),
            learning_rate=float(values["lr"]),
            blueprints=blueprints,
            variant=values["variant"],
            seed=int(values["seed"]),
            softmax=values["softmax"],
            candidates=int(values["candidates"]),
        )

    @property
    def path(self) -> str:
        """The micro-tuning path: ``auto`` picks the batched one wherever it covers the parameters."""
        chosen = self.values["path"]
        if chosen == "auto":
            supported = batched_supported(self.options.params, self.masked_lm.num_layers, self.masked_lm.layout)
            return "batched" if supported or self.options.variant != "neural" else "reference"
        return chosen

    @property
    def device(self) -> torch.device:
        """Where texts are micro-tuned: ``device=`` on the batched path; the reference path runs on the CPU."""
        if self.path == "reference":
            if self.values["device"] not in ("auto", "cpu"):
                raise InputError(f"neural: device={self.values['device']} needs the batched path; the reference path runs on the CPU")
            return torch.device("cpu")
        return resolve_device(self.values["device"])

    @property
    def tuning_lm(self) -> MaskedLM:
        """The masked LM on :attr:`device` (the loaded CPU one itself on the CPU)."""
        return masked_lm_on(self.masked_lm, self.device)

    @property
    def dimension(self) -> int:
        return embedding_width(self.masked_lm, self.options)

    def cache_key(self, text: str, variant: str | None = None) -> str:
        """Key of one text's cached embedding: model fingerprint, head hash, options, path and the text itself.

        Off the CPU the device kind joins the key: a GPU's embeddings agree with the CPU's to float
        rounding, not bit for bit (docs/neural.md), so neither stands in for the other; CPU keys are unchanged.
        """
        options = self.options if variant is None else replace(self.options, variant=variant)
        masked_lm = self.masked_lm
        where = () if self.device.type == "cpu" else (self.device.type,)
        return cache_key("neural", masked_lm.fingerprint, masked_lm.head_hash, masked_lm.max_length, options.key(), self.path, text, *where)

    def embed(self, texts: Sequence[str], show_progress_bar: bool | None = None) -> np.ndarray:
        """float32 rows, one per text; cached texts are read back, the others micro-tuned together.

        With the cache on, one micro-tuning run also caches the variants it yields for free (see
        :func:`~embedlab.neural.variants.shared_run_variants`), so evaluating all Appendix G variants
        costs one run per text. Texts are micro-tuned and cached in slices of :data:`CACHE_SLICE`, so an
        interrupted long run keeps the slices it finished.
        """
        texts = list(texts)
        found: dict[str, np.ndarray] = {}
        for text in dict.fromkeys(texts):
            vector = self.store.load(self.cache_key(text)) if self.use_cache else None
            if vector is not None:
                found[text] = vector
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            own = self.options.variant
            variants = shared_run_variants(self.options, self.masked_lm.num_layers, self.masked_lm.layout) if self.use_cache and self.path == "batched" else (own,)
            first_index = {text: position for position, text in reversed(list(enumerate(texts)))}
            bar = runtime.progress_bar(total=len(missing), desc="neural micro-tuning", unit=" texts",
                                       disable=not runtime.show_progress(bool(show_progress_bar)))  # rate and ETA
            try:
                for start in range(0, len(missing), CACHE_SLICE):
                    piece = missing[start : start + CACHE_SLICE]
                    vectors = embed_texts_variants(
                        self.tuning_lm, piece, self.options, variants, path=self.path, progress=bar.update, indices=[first_index[text] for text in piece],
                        memory=self.values["memory"],
                    )
                    for row, text in enumerate(piece):
                        found[text] = vectors[own][row]
                        if self.use_cache:
                            for variant in variants:
                                self.store.save(self.cache_key(text, variant), vectors[variant][row])
            finally:
                bar.close()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[text] for text in texts]).astype(np.float32)


class NeuralMethod(VectorMethod):
    """``neural:MODEL[,options]``: see the module docstring."""

    def __init__(self, spec) -> None:
        super().__init__(spec)
        self.embedder = NeuralEmbedder(spec.model, {key: spec.get(key) for key in NEURAL_OPTIONS})

    @property
    def fingerprint(self) -> str:
        return f"{self.embedder.masked_lm.fingerprint}-{self.embedder.masked_lm.head_hash}"

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        return self.embedder.embed(texts, show_progress_bar=show_progress_bar)


NEURAL_FAMILY = Family("neural", NEURAL_OPTIONS, NeuralMethod, "neural embeddings: weight changes after micro-tuning on each text (neural-embeddings paper)")
