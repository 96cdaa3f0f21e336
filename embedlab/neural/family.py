"""The ``neural`` method family: neural embeddings (paper §2, Eq. 1) and their Appendix C/G variants as specs.

Examples::

    neural:minilm                              # 3 head vectors (L0, L1, L2), 10 epochs, lr 1e-2: width 3 x 384
    neural:minilm,head=untrained               # the same with BERT's untrained head initialisation
    neural:minilm,params=block,epochs=5        # the last block's output vectors (Appendix G's "neural")
    neural:minilm,params=block-dense-bias      # Appendix G's neural-1
    neural:minilm,params=block,variant=cls-diff,epochs=5   # Appendix G hidden-layer variants
    neural:minilm,skip-layer=2                 # Appendix C.1 ablation Neural-L2
    neural:minilm,skip-blueprint=1             # Appendix C.2 ablation Neural-B1
    neural:minilm,softmax=candidates           # epoch 1 exact, then candidate sets (K=256): cheaper, near-exact
    neural:minilm,softmax=candidates,dtype=bf16  # the fastest on a CPU with native bf16 (docs/neural.md, "Choosing a speed")
    neural:minilm+minilm                       # Appendix H: normalised concatenation (the spec parser's '+')
    neural:minilm,device=cuda,memory=8GB       # the batched path on a GPU, groups planned for 8 GB

This module orchestrates the parts: inputs (:mod:`~embedlab.neural.inputs`), the reference and batched
micro-tuning paths (:mod:`~embedlab.neural.reference`, :mod:`~embedlab.neural.batched`, run by :mod:`~embedlab.neural.tuning`) and what is read
off a run (:mod:`~embedlab.neural.variants`). Embeddings are cached per text in the runtime's
``ArrayStore("neural")`` (checksummed), keyed by the model fingerprint, the head hash, the options, the
path and the text, so reruns never micro-tune a text twice. A run that tunes the last block caches the
neural embedding and all six hidden-layer variants of its texts at once. The batched path's frozen
features are cached per text too (``ArrayStore("neural_frozen")``, :func:`~embedlab.neural.frozen.feature_key`),
so specs that differ only in what acts after them (``softmax=``, ``epochs=``, ``lr=``, the head's tuned
vectors …) run the frozen forward once between them. ``dtype=bf16`` runs that forward and the
vocabulary-wide products in bf16 (:mod:`~embedlab.neural.vocabulary`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch

from embedlab.errors import InputError
from embedlab.methods.base import Family, VectorMethod
from embedlab.methods.precision import OUTPUT_OPTIONS
from embedlab.models.compute_choice import resolve_compute
from embedlab.models.precision import fingerprint_suffix
from embedlab.neural.batched import batched_supported
from embedlab.neural.candidates import SOFTMAX_MODES
from embedlab.neural.device import DEVICES_HELP, check_device, check_memory, resolve_device
from embedlab.neural.head import MaskedLM, load_masked_lm
from embedlab.neural.inputs import BLUEPRINTS
from embedlab.neural.options import HEAD_VECTORS, NeuralOptions, resolve_parameter_names
from embedlab.neural.tuning import PATHS, embed_texts_variants, embedding_width, masked_lm_on
from embedlab.neural.variants import VARIANTS, shared_run_variants
from embedlab.neural.vocabulary import forward_model, model_lowered_decoder
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.progress import progress_bar
from embedlab.runtime.reuse import note_computed_texts, note_reused_texts
from embedlab.spec import Option, finite_number, whole_number

# Texts micro-tuned per call of the batched path before their embeddings are cached; large enough
# that the batched path's groups (about 4,096 masked positions, 100-200 sentences) stay full.
CACHE_SLICE = 512


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
    "epochs": Option("10", help="micro-tuning epochs (one full-batch AdamW step each)", validate=whole_number(1)),  # 0 epochs tune nothing
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
    "dtype": Option("fp32", ("fp32", "bf16", "fp16", "auto"),
                    help="compute of the frozen forward and the vocabulary-wide products of micro-tuning: fp32 (exact), bf16, fp16, auto "
                         "(the fastest native compute, measured once per machine; fp32 on CUDA, where lower compute was slower); tuned vectors, AdamW state and weight changes stay "
                         "float32; batched path only; enters the fingerprint"),
    "memory": Option("auto", help="memory a batched group plans for: auto (CUDA: half the free device memory; CPU: the default group "
                     "size) or a size such as 512MB or 2GB; a group that still runs out is split in half and retried", validate=check_memory),
}


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
        self.feature_store = ArrayStore("neural_frozen")  # frozen features, shared by every spec with the same ones
        self._masked_lm: MaskedLM | None = None
        self._options: NeuralOptions | None = None

    @property
    def masked_lm(self) -> MaskedLM:
        if self._masked_lm is None:
            self._masked_lm = load_masked_lm(self.model_name, head=self.values["head"])
        return self._masked_lm

    def load(self) -> NeuralEmbedder:
        """Everything a run reads before its first text: the masked LM on its device, the resolved options and, for a
        lower ``dtype=`` on the batched path, the model's copy and output embeddings in it (made once per process;
        otherwise the first group pays them: 0.04 s for MiniLM, a fifth of 20 STS-B sentences' candidate-set bf16 run)."""
        masked_lm, options = self.tuning_lm, self.options
        if self.path == "batched" and options.compute != "fp32":
            forward_model(masked_lm, options.compute)
            model_lowered_decoder(masked_lm, options.compute)
        return self

    @property
    def parameter_count(self) -> int:
        """The masked LM's parameters, head included (micro-tuning runs the whole model)."""
        return int(sum(parameter.numel() for parameter in self.masked_lm.model.parameters()))

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
            compute=self.compute,
        )

    @property
    def compute(self) -> str:
        """The resolved ``dtype=`` (:func:`neural_compute`)."""
        return neural_compute(self.values["dtype"], self.values["path"], resolve_device(self.values["device"]),
                              lambda: self.masked_lm.hidden_size)

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
        note_reused_texts(found)  # micro-tuned earlier: a cost being measured is told (runtime.reuse)
        note_computed_texts(missing)
        if missing:
            own = self.options.variant
            variants = shared_run_variants(self.options, self.masked_lm.num_layers, self.masked_lm.layout) if self.use_cache and self.path == "batched" else (own,)
            first_index = {text: position for position, text in reversed(list(enumerate(texts)))}
            bar = progress_bar(total=len(missing), desc="neural micro-tuning", unit=" texts",
                               show=bool(show_progress_bar))  # rate and ETA
            try:
                for start in range(0, len(missing), CACHE_SLICE):
                    piece = missing[start : start + CACHE_SLICE]
                    vectors = embed_texts_variants(
                        self.tuning_lm, piece, self.options, variants, path=self.path, progress=bar.update, indices=[first_index[text] for text in piece],
                        memory=self.values["memory"], feature_store=self.feature_store if self.use_cache else None,
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
        return f"{self.embedder.masked_lm.fingerprint}-{self.embedder.masked_lm.head_hash}{fingerprint_suffix(self.embedder.options.compute)}"

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    @property
    def uses_gpu(self) -> bool:
        """The batched micro-tuning path runs on a GPU where there is one, unless ``device=cpu`` pins it."""
        return self.parsed.get("device") != "cpu"

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        return self.embedder.embed(texts, show_progress_bar=show_progress_bar)


# the output options (precision, truncate_dim) act in VectorMethod.encode, after the embedder
NEURAL_FAMILY = Family("neural", {**NEURAL_OPTIONS, **OUTPUT_OPTIONS}, NeuralMethod, "neural embeddings: weight changes after micro-tuning on each text (neural-embeddings paper)")


def neural_compute(dtype: str, path: str, device: torch.device, hidden: Callable[[], int]) -> str:
    """The compute micro-tuning runs in for ``dtype=``: ``auto`` is measured on the batched path's device
    (:mod:`embedlab.models.compute_choice`), except where lower compute is known not to pay for micro-tuning: the
    reference path computes in fp32, and on CUDA the lowered copies cost more than they save (an H200: bf16 0.37×
    fp32 end to end, docs/records/bench_neural.md), while the measured workload, an encoder block, was faster in
    fp16, so it does not predict micro-tuning there. ``hidden`` (the model's width) is asked only when measuring."""
    if dtype == "auto" and (path == "reference" or device.type == "cuda"):
        return "fp32"
    return resolve_compute(dtype, "none", device, hidden() if dtype == "auto" else None)
