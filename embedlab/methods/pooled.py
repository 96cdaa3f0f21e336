"""The pooling paper's families (§3.1–3.4): pooled token vectors, from four token sources.

* ``pooled`` (the default: ``minilm``, ``minilm:layers=1+last,...``) — contextual token states pooled;
* ``random`` — random static token vectors (§3.2.5);
* ``avg`` — context-averaged static token vectors (§3.2.3);
* ``bert+avg`` — the mix v = (1 − w)·v_model + w·v_Avg (Eq. 10);
* ``distil`` — each vocabulary token alone through the model, last layer mean-pooled (model2vec's distillation);
* ``static`` — a model2vec model folder (``static:PATH``, ``static:tokenlearn``): its table, token mapping
  and weights, with the paper's token weights and post-processing available on top as for ``avg``.

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
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from safetensors.numpy import save as safetensors_save

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.errors import InputError
from embedlab.methods.base import Family, VectorMethod, check_texts
from embedlab.methods.precision import COMPUTE_OPTIONS, OUTPUT_OPTIONS, check_output, compute_of, output_options
from embedlab.methods.prompts import (ROLE_OPTIONS, prompted_pipeline, role_prompts, user_prompts_digest,
                                      warn_unusual_pairing)
from embedlab.models import LoadedModel, ModelTraits, load_model, model_traits
from embedlab.pooling.aggregation import AGGREGATIONS, FlatTokens
from embedlab.pooling.pipeline import WEIGHTINGS, PoolingPipeline, TokenSelection
from embedlab.pooling.postprocess import Chain, make_step, parse_chain, read_safetensors, validate_chain
from embedlab.pooling.sources import (AvgTokens, ContextualTokens, DistilledTokens, ImportedStaticTokens, MixedTokens, PromptSetTokens,
                                     RandomTokens, TokenSource, resolve_layers)
from embedlab.pooling.static_folders import StaticModelFolder, load_static_model
from embedlab.pooling.weights import FILTERS, excluded_vocabulary
from embedlab.runtime import ArrayStore, atomic_write_bytes, cache_key
from embedlab.spec import POOLED, MethodSpec, Option, finite_number, whole_number
from embedlab.tokens.forward import check_max_tokens
from embedlab.tokens.templates import NO_MASK_ALTERNATIVES, TEMPLATE_NAMES, get_templates, needs_mask_token

# ·^W post-processing is fitted on this many WikiText-2 train sentences (a seeded sample).
REFERENCE_SENTENCES = 10_000
REFERENCE_SEED = 0


# --- options, each stated once ------------------------------------------------------------------------

def _validate_layers(value: str) -> str:
    items = value.split("+")
    for item in items:
        if item != "last" and not item.lstrip("-").isdigit():
            raise InputError("layers are integers from -1 to L, or 'last', joined by '+'")
        if item != "last" and int(item) < -1:
            raise InputError("the lowest layer is -1 (static token embeddings)")
    unique = sorted(set(items), key=lambda item: (item == "last", int(item) if item != "last" else 0))
    return "+".join(unique)


def _validate_filter(value: str) -> str:
    if value in ("none", "biases"):
        return value
    items = set(value.split("+"))
    if items - set(FILTERS):
        raise InputError(f"filters are none, biases, or a '+'-joined subset of {', '.join(FILTERS)}")
    return "biases" if items == set(FILTERS) else "+".join(name for name in FILTERS if name in items)


# token source
LAYERS_OPTION = Option("last", help="layers averaged, '+'-joined: -1 (static), 0 (embedding output), 1..L, last", validate=_validate_layers)
TEMPLATE_OPTION = Option("none", ("none", *TEMPLATE_NAMES), "prompt template: T0–T4 (Table 1, need a mask token); for models "
                         "without one prompteol (with pool=last), metaeol (four prompts, pool=last), echo (the text twice, pool=mask)")
SEED_OPTION = Option("0", help="seed of the random token vectors", validate=whole_number(0))
STD_OPTION = Option("0.1", help="standard deviation of the random token vectors", validate=finite_number(positive=True))


def _validate_truncate(value: str) -> str:
    return value if value == "none" else whole_number(1)(value)


# Long texts are split into sentence-packed chunks and every token pooled (the papers' protocol). A cut is
# only ever asked for by name: `truncate=256` keeps each text's first 256 input tokens, special tokens
# included, as sentence-transformers' max_seq_length does (the neural paper's SummEval row, Table 4).
TRUNCATE_OPTION = Option("none", help="cut each text to its first N model-input tokens, special tokens included "
                         "(sentence-transformers' max_seq_length); none: long texts are chunked by sentences, nothing is cut",
                         validate=_validate_truncate)


def _validate_dim(value: str) -> str:
    return value if value == "model" else whole_number(1)(value)


# The pooling paper's RE vectors are 768 wide (bert-base-uncased); MiniLM has the same uncased vocabulary
# at width 384, so `random:minilm,dim=768` is the paper's RE model up to the random draw.
DIM_OPTION = Option("model", help="width of the random token vectors: 'model' (the model's hidden size) or a whole number", validate=_validate_dim)
W_OPTION = Option("0.5", help="weight of the Avg vectors in (1-w)·model + w·Avg (Eq. 10); may be negative", validate=finite_number())
# token selection and weights
WEIGHTS_OPTION = Option("none", WEIGHTINGS, "token weights: none, idf over the target texts (idf^T), idf over WikiText-2 (idf^W)")
FILTER_OPTION = Option("none", help="drop tokens: none, biases (= frequent+punct+subword), or a '+'-joined subset", validate=_validate_filter)
SPECIAL_OPTION = Option("include", ("include", "exclude"), "include the special tokens the tokenizer adds in means (sentence-transformers "
                        "does): [CLS]/[SEP] of an encoder, BOS/EOS of a decoder (none for GPT-2 or SmolLM2)")
# aggregation: static sources have no template [MASK] tokens and one chunk per text
POOL_OPTION = Option("mean", AGGREGATIONS, "token aggregation: mean, cls (encoders), max, mask (the template's marked tokens: "
                     "[MASK] tokens, echo's second copy), mean-no-mask, last (each chunk's last token; decoders)")
STATIC_POOL_OPTION = Option("mean", ("mean", "max"), "token aggregation: mean or max")
# post-processing
POST_OPTION = Option("none", help="post-processing chain, '+'-joined: zscore, quantile-u, quantile-n, whiten, abtt-D, normalize; '@ref' fits a step on WikiText-2", validate=validate_chain)

# Each family's options in the order its canonical specs list them (the order is part of every stored spec;
# options added later go at the end, so that no earlier canonical spec changes). Families that run a
# transformer take the compute options (dtype, quantize); every family takes the output options.
POOLED_OPTIONS = {"layers": LAYERS_OPTION, "pool": POOL_OPTION, "weights": WEIGHTS_OPTION, "filter": FILTER_OPTION,
                  "special": SPECIAL_OPTION, "post": POST_OPTION, "template": TEMPLATE_OPTION, "truncate": TRUNCATE_OPTION,
                  **COMPUTE_OPTIONS, **OUTPUT_OPTIONS}
RANDOM_OPTIONS = {"seed": SEED_OPTION, "std": STD_OPTION, "dim": DIM_OPTION, "weights": WEIGHTS_OPTION, "filter": FILTER_OPTION,
                  "special": SPECIAL_OPTION, "post": POST_OPTION, "pool": STATIC_POOL_OPTION, **OUTPUT_OPTIONS}
AVG_OPTIONS = {"layers": LAYERS_OPTION, "weights": WEIGHTS_OPTION, "filter": FILTER_OPTION,
               "special": SPECIAL_OPTION, "post": POST_OPTION, "pool": STATIC_POOL_OPTION, **COMPUTE_OPTIONS, **OUTPUT_OPTIONS}
MIX_OPTIONS = {"w": W_OPTION, **POOLED_OPTIONS}

DISTIL_OPTIONS = {"weights": WEIGHTS_OPTION, "filter": FILTER_OPTION, "special": SPECIAL_OPTION, "post": POST_OPTION,
                  "pool": STATIC_POOL_OPTION, **COMPUTE_OPTIONS, **OUTPUT_OPTIONS}
# A model2vec model's own last step: unit length when its config.json says "normalize": true.
NORMALIZE_OPTION = Option("model", ("model", "yes", "no"),
                          "unit-normalise the final vectors: model (as the folder's config.json says), yes, no")
STATIC_OPTIONS = {"weights": WEIGHTS_OPTION, "filter": FILTER_OPTION, "post": POST_OPTION, "pool": STATIC_POOL_OPTION,
                  "normalize": NORMALIZE_OPTION, **OUTPUT_OPTIONS}
STATIC = "static"


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


def check_for_model(model: LoadedModel | ModelTraits, spec: MethodSpec) -> None:
    """Refuse, before any work, what this model cannot do: a mask template without a mask token, the [CLS]
    vector of a decoder (its first token has seen nothing else), a template's marks it does not have.

    Run when the method is built, on the model's config and tokenizer files (:func:`model_traits`), and
    again on the loaded model (a GGUF file's traits are known once it is converted)."""
    name = model.name if isinstance(model, LoadedModel) else spec.model
    kind = model.kind
    has_mask = model.tokenizer.mask_token_id is not None if isinstance(model, LoadedModel) else model.has_mask_token
    schema_options = spec.schema.options if spec.schema is not None else {}
    template = spec.get("template") if "template" in schema_options else "none"
    if needs_mask_token(template) and not has_mask:
        raise InputError(f"{spec}: template {template} needs a mask token and model {name!r} ({kind}) has none; "
                         f"use {NO_MASK_ALTERNATIVES}")
    _check_limits(name, model.num_layers, model.max_length, spec)
    pool = spec.get("pool")
    if pool == "cls" and kind == "decoder":
        raise InputError(f"{spec}: pool=cls takes the first token, which in decoder {name!r} has seen only itself; "
                         "use pool=last (the last token, which has seen the whole text) or pool=mean")
    warn_unusual_pairing(str(spec), template, pool)
    if pool in ("mask", "mean-no-mask") and template in ("none", "prompteol", "metaeol"):
        hint = "pool=last" if template in ("prompteol", "metaeol") else "a T0–T4 template (mask token) or template=echo"
        raise InputError(f"{spec}: pool={pool} averages the tokens a template marks, and template={template} marks none; use {hint}")


def _check_limits(name: str, num_layers: int | None, max_length: int | None, spec: MethodSpec) -> None:
    """A layer the model does not have, or a cut longer than its input, refused with the model's limit."""
    options = spec.schema.options if spec.schema is not None else {}
    if "layers" in options and num_layers is not None:
        for item in spec.get("layers").split("+"):
            if item != "last" and not -1 <= int(item) <= num_layers:
                raise InputError(f"{spec}: layers={spec.get('layers')}: layer {item} is beyond model {name!r}, which has "
                                 f"{num_layers} layers; use layers from -1 to {num_layers} (-1: static token embeddings, "
                                 f"0: embedding output, {num_layers} or last: the last layer), joined by '+'")
    if "truncate" in options and max_length is not None and spec.get("truncate") != "none":
        if int(spec.get("truncate")) > max_length:
            raise InputError(f"{spec}: truncate={spec.get('truncate')}: model {name!r} takes at most {max_length} input "
                             f"tokens; use truncate=1 to truncate={max_length}, or leave truncate out (without truncate, "
                             "long texts are split into sentence-packed chunks and nothing is cut)")


TOKEN_SOURCES: dict[str, Callable[[LoadedModel, MethodSpec], TokenSource]] = {
    POOLED: _contextual_tokens,
    "random": lambda model, spec: RandomTokens(model, int(spec.get("seed")), float(spec.get("std")),
                                               None if spec.get("dim") == "model" else int(spec.get("dim"))),
    "avg": lambda model, spec: AvgTokens(model, _layers(model, spec)),
    "distil": lambda model, spec: DistilledTokens(model),
    STATIC: lambda model, spec: ImportedStaticTokens(model),
    "bert+avg": lambda model, spec: MixedTokens(_contextual_tokens(model, spec), AvgTokens(model, _layers(model, spec)), float(spec.get("w"))),
}


def build_pipeline(spec: MethodSpec) -> PoolingPipeline:
    """The stages ``spec`` names: its family's token source, then the options every pooled family shares."""
    if spec.family == STATIC:
        model = load_static_model(spec.model)
    else:
        model = load_model(spec.model, compute=compute_of(spec))
        check_for_model(model, spec)
    post = parse_chain(spec.get("post"))
    if spec.family == STATIC and _final_normalize(model, spec.get("normalize")) and post[-1:] != [("normalize", False)]:
        post.append(("normalize", False))
    return PoolingPipeline(
        source=TOKEN_SOURCES[spec.family](model, spec),
        selection=TokenSelection(
            include_special=spec.family == STATIC or spec.get("special") == "include",
            excluded_vocab=excluded_vocabulary(model.tokenizer, spec.get("filter")),
            weighting=spec.get("weights"),
        ),
        aggregation=spec.get("pool"),
        post=tuple(post),
    )


def _final_normalize(model: StaticModelFolder, choice: str) -> bool:
    return model.normalize if choice == "model" else choice == "yes"


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
        # config and tokenizer files only: a bad combination fails here, not at encode (a static folder has no
        # transformer to check)
        traits = model_traits(spec.model) if spec.family != STATIC else None
        if traits is not None:
            check_for_model(traits, spec)
        compute_of(spec)  # dtype with quantize is refused here, and bf16 without native support warns here
        precision, truncate_dim = output_options(spec)
        known_width = traits.width if traits is not None and spec.family != "random" else None
        check_output(str(spec), precision, truncate_dim, known_width)  # a static folder's width is checked at encode
        # each side's template read once (a template file may change later; this method keeps what it read)
        self._prompts = role_prompts(spec, spec.schema.options if spec.schema is not None else {})

    @functools.cached_property
    def pipeline(self) -> PoolingPipeline:
        """The stages (built on first use, so that constructing a method loads nothing)."""
        return build_pipeline(self.parsed)

    @property
    def model(self) -> LoadedModel:
        return self.pipeline.model

    @property
    def dimension(self) -> int:
        source = self.pipeline.source
        if isinstance(source, RandomTokens) and source.dim is not None:  # `random:MODEL,dim=N`
            return source.dim
        return self.model.hidden_size

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "chain_")

    @property
    def fits_on_target(self) -> bool:
        pipeline = self.pipeline
        return not self.is_fitted and (pipeline.selection.weighting == "idf-target" or any(
            not on_reference and make_step(name).needs_fit for name, on_reference in pipeline.post))

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

    def save_fitted(self, path: str) -> None:
        """Save the statistics learned by ``fit`` (idf^T, post-processing) as safetensors (no pickle)."""
        if not self.is_fitted:
            raise RuntimeError(f"{self.spec}: nothing to save, call fit(texts) first")
        tensors, metadata = self._fitted_tensors()
        metadata.update(spec=self.spec, fingerprint=self.model.fingerprint)
        atomic_write_bytes(Path(path), safetensors_save(tensors, metadata=metadata))

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
    Family(STATIC, STATIC_OPTIONS, PooledMethod, "a model2vec static model folder (static:PATH, static:tokenlearn): "
           "its token table, weights and normalisation, with token weights and post-processing on top"),
)
