"""The pooling paper's families (§3.1–3.4): pooled token vectors, from four token sources.

* ``pooled`` (the default: ``minilm``, ``minilm:layers=1+last,...``) — contextual token states pooled;
* ``random`` — random static token vectors (§3.2.5);
* ``avg`` — context-averaged static token vectors (§3.2.3);
* ``bert+avg`` — the mix v = (1 − w)·v_model + w·v_Avg (Eq. 10);
* ``distil`` — each vocabulary token alone through the model, last layer mean-pooled (model2vec's distillation);
* ``static`` — a model2vec model folder (:mod:`embedlab.methods.static_folder`).

Each family is an option table and a token source; everything after the source — token selection and
weights, aggregation, post-processing — is the same :class:`~embedlab.pooling.pipeline.PoolingPipeline`,
built from the spec by :func:`build_pipeline`. Target-fitted statistics (idf^T, post-processing without
``@ref``) are learned by ``fit(texts)``; ``encode`` on an unfitted method fits on the texts it is given,
as the paper does for a task's texts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from safetensors.numpy import save as safetensors_save

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.errors import InputError
from embedlab.methods.base import Family, VectorMethod, check_texts
from embedlab.methods.pooled_options import (AVG_OPTIONS, DISTIL_OPTIONS, MIX_OPTIONS, POOLED_OPTIONS, RANDOM_OPTIONS,
                                             check_for_model)
from embedlab.methods.precision import check_output, compute_of, output_options
from embedlab.methods.prompts import ROLE_OPTIONS, prompted_pipeline, role_prompts, user_prompts_digest
from embedlab.models.loading import LoadedModel, ModelTraits, load_model, model_traits
from embedlab.pooling.aggregation import FlatTokens
from embedlab.pooling.pipeline import PoolingPipeline, TokenSelection
from embedlab.pooling.postprocess import Chain, ChainStep, parse_chain, read_safetensors
from embedlab.pooling.sources import (AvgTokens, ContextualTokens, DistilledTokens, MixedTokens, PromptSetTokens, RandomTokens,
                                     TokenSource, resolve_layers)
from embedlab.pooling.weights import excluded_vocabulary
from embedlab.runtime.cache.arrays import ArrayStore, sorted_header
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.cache.hashing import cache_key
from embedlab.spec import POOLED, MethodSpec
from embedlab.tokens.forward import check_max_tokens
from embedlab.tokens.templates import get_templates

# ·^W post-processing is fitted on this many WikiText-2 train sentences (a seeded sample).
REFERENCE_SENTENCES = 10_000
REFERENCE_SEED = 0


# --- stage 1 per family; stages 2–4 are shared ----------------------------------------------------------

def _layers(model: LoadedModel, spec: MethodSpec) -> tuple[int, ...]:
    return resolve_layers(spec.get("layers"), model.num_layers)


def _contextual_tokens(model: LoadedModel, spec: MethodSpec) -> ContextualTokens | PromptSetTokens:
    truncate = spec.get("truncate")
    max_tokens = None if truncate == "none" else int(truncate)
    check_max_tokens(model, max_tokens)  # truncate=600 on a 256-token model fails when the method is built
    templates = get_templates(spec.get("template"))
    if len(templates) > 1:  # MetaEOL's prompts
        return PromptSetTokens(model, _layers(model, spec), templates, max_tokens)
    return ContextualTokens(model, _layers(model, spec), templates[0] if templates else None, max_tokens)


TOKEN_SOURCES: dict[str, Callable[[LoadedModel, MethodSpec], TokenSource]] = {
    POOLED: _contextual_tokens,
    "random": lambda model, spec: RandomTokens(model, int(spec.get("seed")), float(spec.get("std")),
                                               None if spec.get("dim") == "model" else int(spec.get("dim"))),
    "avg": lambda model, spec: AvgTokens(model, _layers(model, spec)),
    "distil": lambda model, spec: DistilledTokens(model),
    "bert+avg": lambda model, spec: MixedTokens(_contextual_tokens(model, spec), AvgTokens(model, _layers(model, spec)), float(spec.get("w"))),
}


def build_pipeline(spec: MethodSpec, model: LoadedModel, source: TokenSource, include_special: bool,
                   post: Sequence[ChainStep]) -> PoolingPipeline:
    """The stages ``spec`` names after its family's token source: the options every pooled family shares."""
    return PoolingPipeline(
        source=source,
        selection=TokenSelection(
            include_special=include_special,
            excluded_vocab=excluded_vocabulary(model.tokenizer, spec.get("filter")),
            weighting=spec.get("weights"),
        ),
        aggregation=spec.get("pool"),
        post=tuple(post),
    )


# --- the method -------------------------------------------------------------------------------------------

class PooledMethod(VectorMethod):
    """A :class:`PoolingPipeline` built from the spec, plus the statistics fitted on target texts.

    Fitted state, scikit-learn style: :meth:`fit` (or :meth:`load_fitted`) sets ``idf_`` (the token
    weights' idf, None without weights) and ``chain_`` (the fitted post-processing); an unfitted method
    has neither and fits on whatever texts each ``encode`` call gets. The fitted state is part of the
    method's identity: see :attr:`fingerprint`.
    """

    idf_: np.ndarray | None
    chain_: Chain

    def __init__(self, spec: MethodSpec) -> None:
        super().__init__(spec)
        # config and tokenizer files only: a bad combination fails here, not at encode
        traits = self._model_traits()
        if traits is not None:
            check_for_model(traits, spec)
        compute_of(spec)  # dtype with quantize is refused here, and bf16 without native support warns here
        precision, truncate_dim = output_options(spec)
        known_width = traits.width if traits is not None and spec.family != "random" else None
        check_output(str(spec), precision, truncate_dim, known_width)  # a static folder's width is checked at encode
        # each side's template read once (a template file may change later; this method keeps what it read)
        self._prompts = role_prompts(spec, spec.schema.options if spec.schema is not None else {})

    def _model_traits(self) -> ModelTraits | None:
        """What the model's config and tokenizer files say (None: a model that has no transformer to check)."""
        return model_traits(self.parsed.model)

    @functools.cached_property
    def pipeline(self) -> PoolingPipeline:
        """The stages (built on first use, so that constructing a method loads nothing)."""
        spec = self.parsed
        model = load_model(spec.model, compute=compute_of(spec))
        check_for_model(model, spec)
        return build_pipeline(spec, model, TOKEN_SOURCES[spec.family](model, spec), spec.get("special") == "include",
                              parse_chain(spec.get("post")))

    @property
    def model(self) -> LoadedModel:
        return self.pipeline.model

    @property
    def parameter_count(self) -> int | None:
        """The transformer's parameters when one runs on the texts (a contextual source); None for a static table."""
        return None if self.pipeline.source.static else self.model.parameter_count

    @property
    def dimension(self) -> int:
        return self.pipeline.source.width

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "chain_")

    @property
    def fits_on_target(self) -> bool:
        return not self.is_fitted and self.pipeline.depends_on_texts

    @property
    def fittable(self) -> bool:
        return True

    def fit_for_corpus(self, texts: Sequence[str], batch_size: int = 32) -> list[bytes]:
        depends = self.pipeline.depends_on_texts
        return self.fit(list(texts) if depends else [texts[0]], batch_size=batch_size, show_progress_bar=False).fitted_state()

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint, plus a short hash of the fitted arrays once fitted.

        Evaluation caches and the results database key on it, so they tell a method fitted on texts A
        from one fitted on texts B, and both from the unfitted (transductive) method.
        """
        own = self.model.fingerprint + user_prompts_digest(self.parsed, self._prompts)
        if not self.is_fitted:
            return own
        tensors, metadata = self._fitted_tensors()
        digest = hashlib.sha256(json.dumps(metadata, sort_keys=True).encode())
        for name in sorted(tensors):
            array = np.ascontiguousarray(tensors[name])
            digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
            digest.update(array.tobytes())
        return f"{own}-fit-{digest.hexdigest()[:12]}"

    def token_vectors(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> tuple[FlatTokens, np.ndarray]:
        """Stage 1 alone: every text's tokens laid flat and their (T, d) vectors (token-level matching uses them)."""
        return self.pipeline.source.token_vectors(texts, batch_size, show_progress_bar)

    # -- fitting and encoding ----------------------------------------------------------------------
    def fit(self, texts: Sequence[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> PooledMethod:
        """Learn the target statistics (idf^T, post-processing) from ``texts``; later encodes reuse them."""
        texts = check_texts(texts)
        if not texts:
            raise InputError("fit needs at least one text")
        self.idf_, self.chain_, _ = self._fit_on(texts, batch_size, show_progress_bar)
        return self

    def _fit_on(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> tuple[np.ndarray | None, Chain, np.ndarray]:
        """idf and chain fitted on ``texts``, and the texts' vectors under them."""
        idf = self.pipeline.idf(texts)
        pooled = self.pipeline.pool(texts, idf, batch_size, show_progress_bar)
        chain, vectors = self.pipeline.fit_post(pooled, lambda: self.reference_vectors(idf, batch_size, show_progress_bar))
        return idf, chain, vectors

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        if self.is_fitted:
            return self.chain_.transform(self.pipeline.pool(texts, self.idf_, batch_size, show_progress_bar))
        return self._fit_on(texts, batch_size, show_progress_bar)[2]

    # -- the two sides of an asymmetric search -----------------------------------------------------
    @property
    def prompts(self) -> dict[str, str]:
        return dict(self._prompts)

    def _encode_prompted(self, texts: list[str], batch_size: int, show_progress_bar: bool | None, prompt: str) -> np.ndarray:
        """``texts`` under ``prompt``, the rest of the pipeline and the fitted state unchanged."""
        pipeline = prompted_pipeline(self.pipeline, prompt, self.spec)
        if self.is_fitted:
            return self.chain_.transform(pipeline.pool(texts, self.idf_, batch_size, show_progress_bar))
        idf = pipeline.idf(texts)
        return pipeline.fit_post(pipeline.pool(texts, idf, batch_size, show_progress_bar),
                                 lambda: self.reference_vectors(idf, batch_size, show_progress_bar))[1]

    def reference_vectors(self, idf: np.ndarray | None, batch_size: int = 32, show_progress_bar: bool | None = None) -> np.ndarray:
        """Pooled vectors (stages 1–3) of a seeded sample of WikiText-2 train sentences: what ``@ref``
        post-processing steps are fitted on (the paper's ·^W, §3.4.6).

        Cached on disk unless they depend on the target texts (``weights=idf-target``).
        """
        sentences = wikitext2_sentences("train", min_chars=10, unk_token=self.model.tokenizer.unk_token or "<unk>")
        rng = np.random.default_rng(REFERENCE_SEED)
        chosen = np.sort(rng.choice(len(sentences), min(REFERENCE_SENTENCES, len(sentences)), replace=False))
        sample = [sentences[i] for i in chosen]

        def pool() -> np.ndarray:
            return self.pipeline.pool(sample, idf, batch_size, show_progress_bar)

        if self.pipeline.selection.weighting == "idf-target":
            return pool()
        key = cache_key(str(self.parsed.replace(post="none")), self.model.fingerprint, len(sample), REFERENCE_SEED)
        return ArrayStore("reference_vectors").get(key, pool)

    # -- fitted state on disk ----------------------------------------------------------------------
    def _fitted_tensors(self) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        tensors, metadata = self.chain_.to_tensors()
        tensors = {f"post.{key}": value for key, value in tensors.items()}
        if self.idf_ is not None:
            tensors["idf"] = self.idf_
        return tensors, metadata

    def fitted_state(self) -> list[bytes]:
        """The statistics learned by ``fit`` (idf^T, post-processing) as safetensors bytes (no pickle)."""
        if not self.is_fitted:
            raise RuntimeError(f"{self.spec}: nothing to save, call fit(texts) first")
        tensors, metadata = self._fitted_tensors()
        metadata.update(spec=self.spec, fingerprint=self.model.fingerprint)
        return [sorted_header(safetensors_save(tensors, metadata=metadata))]

    def save_fitted(self, path: str) -> None:
        atomic_write_bytes(Path(path), self.fitted_state()[0])

    def restore(self, states: Sequence[bytes]) -> PooledMethod:
        if len(states) != 1:
            raise ValueError(f"{self.spec}: {len(states)} fitted states for 1 fittable part")
        with tempfile.TemporaryDirectory() as folder:  # safetensors reads metadata from a file only
            path = Path(folder) / "fitted.safetensors"
            path.write_bytes(states[0])
            return self.load_fitted(str(path))

    def load_fitted(self, path: str) -> PooledMethod:
        """Restore statistics saved by ``save_fitted`` for this same method and model."""
        tensors, metadata = read_safetensors(path)
        if metadata.get("spec") != self.spec or metadata.get("fingerprint") != self.model.fingerprint:
            raise InputError(
                f"{path} holds statistics of {metadata.get('spec')!r} (model {metadata.get('fingerprint')}), "
                f"not of {self.spec!r} (model {self.model.fingerprint})"
            )
        self.chain_ = Chain.from_tensors({key[5:]: value for key, value in tensors.items() if key.startswith("post.")}, metadata)
        self.idf_ = tensors.get("idf")
        return self


POOLED_FAMILY = Family(POOLED, POOLED_OPTIONS | ROLE_OPTIONS, PooledMethod, "contextual token states of a transformer, pooled")
POOLED_FAMILIES = (
    POOLED_FAMILY,
    Family("random", RANDOM_OPTIONS, PooledMethod, "random N(0, std²) token vectors with the model's tokenizer and width (§3.2.5)"),
    Family("avg", AVG_OPTIONS, PooledMethod, "token vectors averaged over their WikiText-2 contexts (§3.2.3)"),
    Family("bert+avg", MIX_OPTIONS, PooledMethod, "(1-w)·contextual + w·Avg token vectors (Eq. 10)"),
    Family("distil", DISTIL_OPTIONS, PooledMethod, "static token vectors distilled as model2vec does: each vocabulary token "
           "alone in [CLS] t [SEP], last layer mean-pooled"),
)
