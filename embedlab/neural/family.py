"""The ``neural`` method family: neural embeddings (paper §2, Eq. 1) and their Appendix C/G variants as specs.

Examples::

    neural:minilm                              # 3 head vectors (L0, L1, L2), 10 epochs, lr 1e-2: width 3 x 384
    neural:minilm,head=untrained               # the same with BERT's untrained head initialisation
    neural:minilm,params=block,epochs=5        # the last block's output vectors (Appendix G's "neural")
    neural:minilm,params=block-dense-bias      # Appendix G's neural-1
    neural:minilm,params=block,variant=cls-diff,epochs=5   # Appendix G hidden-layer variants
    neural:minilm,skip-layer=2                 # Appendix C.1 ablation Neural-L2
    neural:minilm,skip-blueprint=1             # Appendix C.2 ablation Neural-B1
    neural:minilm+minilm                       # Appendix H: normalised concatenation (the spec parser's '+')

Embeddings are cached per text under ``cache_dir("neural")`` as ``.npy`` keyed by the model fingerprint,
the head hash, the options, the path and the text, so reruns never micro-tune a text twice. A run that
tunes the last block caches the neural embedding and all six hidden-layer variants of its texts at once.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from embedlab.methods.base import Family, VectorMethod
from embedlab.neural.head import MaskedLM, load_masked_lm
from embedlab.neural.core import (
    BLUEPRINTS,
    VARIANTS,
    NeuralOptions,
    batched_supported,
    cache_key,
    embed_texts_variants,
    embedding_width,
    resolve_parameter_names,
    shared_run_variants,
)
from embedlab.runtime import atomic_write_bytes, cache_dir
from embedlab.spec import Option

# Texts micro-tuned per call of the batched path before their embeddings are cached; large enough
# that the batched path's groups (about 4,096 masked positions, 100-200 sentences) stay full.
CACHE_SLICE = 512

DEFAULT_OPTIONS: dict[str, str] = {
    "params": "head",
    "epochs": "10",
    "lr": "0.01",
    "head": "auto",
    "skip-layer": "none",
    "skip-blueprint": "none",
    "variant": "neural",
    "path": "auto",
    "seed": "0",
}


def _positive_int(value: str) -> str:
    number = int(value)
    if number < 0:
        raise ValueError("must be a non-negative integer")
    return str(number)


def _positive_float(value: str) -> str:
    number = float(value)
    if not number > 0:
        raise ValueError("must be positive")
    return repr(number)


def _index_or_none(limit: int):
    def validate(value: str) -> str:
        if value == "none":
            return value
        if not value.isdigit() or int(value) >= limit:
            raise ValueError(f"must be 'none' or an index 0..{limit - 1}")
        return str(int(value))

    return validate


class NeuralEmbedder:
    """Neural embeddings of texts for one model, head and option set, with a per-text disk cache."""

    def __init__(self, model: str, options: dict[str, str] | None = None, use_cache: bool = True) -> None:
        values = dict(DEFAULT_OPTIONS)
        unknown = set(options or {}) - set(DEFAULT_OPTIONS)
        if unknown:
            raise ValueError(f"neural: unknown option(s) {sorted(unknown)}; valid: {', '.join(DEFAULT_OPTIONS)}")
        values.update(options or {})
        self.model_name = model
        self.values = values
        self.use_cache = use_cache
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
            values = self.values
            names = resolve_parameter_names(values["params"], self.masked_lm.num_layers)
            if values["skip-layer"] != "none":
                skip = int(values["skip-layer"])
                if skip >= len(names) or len(names) == 1:
                    raise ValueError(f"neural: skip-layer={skip} needs at least {max(skip + 1, 2)} tuned layers, params has {len(names)}")
                names = [name for index, name in enumerate(names) if index != skip]
            blueprints = BLUEPRINTS
            if values["skip-blueprint"] != "none":
                skip = int(values["skip-blueprint"])
                blueprints = tuple(blueprint for index, blueprint in enumerate(BLUEPRINTS) if index != skip)
            if values["variant"] not in VARIANTS:
                raise ValueError(f"neural: unknown variant {values['variant']!r}; choose one of {', '.join(VARIANTS)}")
            self._options = NeuralOptions(
                params=tuple(names),
                epochs=int(values["epochs"]),
                learning_rate=float(values["lr"]),
                blueprints=blueprints,
                variant=values["variant"],
                seed=int(values["seed"]),
            )
        return self._options

    @property
    def path(self) -> str:
        chosen = self.values["path"]
        if chosen == "auto":
            return "batched" if batched_supported(self.options.params, self.masked_lm.num_layers) or self.options.variant != "neural" else "reference"
        return chosen

    @property
    def dimension(self) -> int:
        return embedding_width(self.masked_lm, self.options)

    def _cache_file(self, text: str, variant: str | None = None) -> Path:
        options = self.options if variant is None else replace(self.options, variant=variant)
        key = cache_key(self.masked_lm, options, self.path, text)
        return cache_dir("neural", key[:2]) / f"{key}.npy"

    def embed(self, texts: Sequence[str], show_progress_bar: bool | None = None) -> np.ndarray:
        """float32 rows, one per text; cached texts are read back, the others micro-tuned together.

        With the cache on, one micro-tuning run also caches the variants it yields for free (see
        :func:`shared_run_variants`), so evaluating all Appendix G variants costs one run per text.
        """
        from tqdm.auto import tqdm

        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for text in unique:
            file = self._cache_file(text) if self.use_cache else None
            if file is not None and file.exists():
                found[text] = np.load(file, allow_pickle=False)
            else:
                missing.append(text)
        if missing:
            own = self.options.variant
            variants = shared_run_variants(self.options, self.masked_lm.num_layers) if self.use_cache and self.path == "batched" else (own,)
            first_index = {text: position for position, text in reversed(list(enumerate(texts)))}
            bar = tqdm(total=len(missing), desc="neural micro-tuning", disable=not show_progress_bar)
            try:
                # in slices, each cached as soon as it is done, so an interrupted long run keeps its work
                for start in range(0, len(missing), CACHE_SLICE):
                    piece = missing[start : start + CACHE_SLICE]
                    vectors = embed_texts_variants(
                        self.masked_lm, piece, self.options, variants, path=self.path, progress=bar.update, indices=[first_index[text] for text in piece]
                    )
                    for row, text in enumerate(piece):
                        found[text] = vectors[own][row]
                        if self.use_cache:
                            for variant in variants:
                                buffer = io.BytesIO()
                                np.save(buffer, vectors[variant][row], allow_pickle=False)
                                atomic_write_bytes(self._cache_file(text, variant), buffer.getvalue())
            finally:
                bar.close()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[text] for text in texts]).astype(np.float32)


NEURAL_OPTION_HELP = {
    "params": "tuned 1-D parameters: head (L0,L1,L2 of the head transform), block (last block's output vectors), block-dense-bias (neural-1), or names joined by ';' ('layer.last.' = last block)",
    "epochs": "micro-tuning epochs (one full-batch AdamW step each)",
    "lr": "AdamW learning rate (other AdamW settings are torch defaults)",
    "head": "masked-LM head: auto (checkpoint's own, else the shipped trained one), untrained, or a head file",
    "skip-layer": "ablation Neural-L<i>: leave out tuned layer i (Appendix C.1)",
    "skip-blueprint": "ablation Neural-B<i>: leave out masking blueprint i of [(2,1),(1,1),(1,2),(1,3)] (Appendix C.2)",
    "variant": "neural (Eq. 1) or an Appendix G hidden-layer variant: cls, avg, cls-tuned, avg-tuned, cls-diff, avg-diff",
    "path": "auto, batched (many texts at once) or reference (one text at a time, any parameters)",
    "seed": "seed (per-text seeds derive from it and the text)",
}


class NeuralMethod(VectorMethod):
    """``neural:MODEL[,options]``: see the module docstring."""

    def __init__(self, spec) -> None:
        super().__init__(spec)
        options = {key: spec.get(key) for key in DEFAULT_OPTIONS}
        self.embedder = NeuralEmbedder(spec.model, options)

    @property
    def fingerprint(self) -> str:
        return f"{self.embedder.masked_lm.fingerprint}-{self.embedder.masked_lm.head_hash}"

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        return self.embedder.embed(texts, show_progress_bar=show_progress_bar)


NEURAL_OPTIONS = {
    "params": Option(DEFAULT_OPTIONS["params"], help=NEURAL_OPTION_HELP["params"]),
    "epochs": Option(DEFAULT_OPTIONS["epochs"], help=NEURAL_OPTION_HELP["epochs"], validate=_positive_int),
    "lr": Option(DEFAULT_OPTIONS["lr"], help=NEURAL_OPTION_HELP["lr"], validate=_positive_float),
    "head": Option(DEFAULT_OPTIONS["head"], help=NEURAL_OPTION_HELP["head"]),
    "skip-layer": Option(DEFAULT_OPTIONS["skip-layer"], help=NEURAL_OPTION_HELP["skip-layer"], validate=_index_or_none(3)),
    "skip-blueprint": Option(DEFAULT_OPTIONS["skip-blueprint"], help=NEURAL_OPTION_HELP["skip-blueprint"], validate=_index_or_none(len(BLUEPRINTS))),
    "variant": Option(DEFAULT_OPTIONS["variant"], choices=VARIANTS, help=NEURAL_OPTION_HELP["variant"]),
    "path": Option(DEFAULT_OPTIONS["path"], choices=("auto", "batched", "reference"), help=NEURAL_OPTION_HELP["path"]),
    "seed": Option(DEFAULT_OPTIONS["seed"], help=NEURAL_OPTION_HELP["seed"], validate=_positive_int),
}
NEURAL_FAMILY = Family("neural", NEURAL_OPTIONS, NeuralMethod, "neural embeddings: weight changes after micro-tuning on each text (neural-embeddings paper)")
