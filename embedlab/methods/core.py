"""Embedding methods built from method specs, and the family registry.

Families defined here (pooling paper, §3.2–3.4):

* ``pooled`` (the default: ``minilm``, ``minilm:layers=1+last,...``) — contextual token states pooled;
* ``random`` — random static token vectors (§3.2.5);
* ``avg`` — context-averaged static token vectors (§3.2.3);
* ``bert+avg`` — the mix v = (1 − w)·v_model + w·v_Avg (Eq. 10);
* ``st`` — sentence-transformers' own ``encode`` (the baseline).

The registry (:mod:`embedlab.methods.registry`) lists these families beside the neural and matching ones.

Target-fitted statistics (idf^T, post-processing without ``@ref``) are learned by ``fit(texts)``;
``encode`` on an unfitted method fits on the texts it is given, as the paper does for a task's texts.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from safetensors.numpy import save as safetensors_save

from embedlab.models import LoadedModel, load_model
from embedlab.runtime import atomic_write_bytes, cache_dir
from embedlab.pooling.aggregation import AGGREGATIONS, FlatTokens, LayoutMemo, aggregate, resolve_layers, select_tokens, token_weights
from embedlab.pooling.postprocess import Chain, make_step, parse_chain, read_safetensors, validate_chain
from embedlab.methods.base import EmbeddingMethod, Family, VectorMethod, check_texts, unit_rows  # noqa: F401 (re-exported)
from embedlab.spec import POOLED, ConcatSpec, MethodSpec, Option
from embedlab.tokens.templates import TEMPLATES, get_template
from embedlab.pooling.weights import (
    idf_from_documents,
    most_frequent_tokens,
    punctuation_token_mask,
    reference_token_statistics,
    subword_token_mask,
)


# Memos shared by all methods in a process: many configurations over the same texts lay out, tokenise
# and filter them once (see LayoutMemo).
_LAYOUTS = LayoutMemo()
_TOKENIZED: OrderedDict[tuple[str, tuple[str, ...]], FlatTokens] = OrderedDict()
_EXCLUDED: dict[tuple[str, str], np.ndarray] = {}

# ·^W post-processing is fitted on this many WikiText-2 train sentences (a seeded sample).
REFERENCE_SENTENCES = 10_000
REFERENCE_SEED = 0
FILTERS = ("frequent", "punct", "subword")


# --- the pooled families --------------------------------------------------------------------------

def _validate_layers(value: str) -> str:
    items = value.split("+")
    for item in items:
        if item != "last" and not item.lstrip("-").isdigit():
            raise ValueError("layers are integers from -1 to L, or 'last', joined by '+'")
        if item != "last" and int(item) < -1:
            raise ValueError("the lowest layer is -1 (static token embeddings)")
    unique = sorted(set(items), key=lambda item: (item == "last", int(item) if item != "last" else 0))
    return "+".join(unique)


def _validate_filter(value: str) -> str:
    if value in ("none", "biases"):
        return value
    items = set(value.split("+"))
    unknown = items - set(FILTERS)
    if unknown:
        raise ValueError(f"filters are none, biases, or a '+'-joined subset of {', '.join(FILTERS)}")
    return "biases" if items == set(FILTERS) else "+".join(name for name in FILTERS if name in items)


def _validate_float(value: str) -> str:
    try:
        return repr(float(value))
    except ValueError:
        raise ValueError("expected a number") from None


def _validate_int(value: str) -> str:
    if not value.lstrip("-").isdigit():
        raise ValueError("expected an integer")
    return str(int(value))


COMMON_OPTIONS = {
    "pool": Option("mean", AGGREGATIONS, "token aggregation: mean, cls, max, mask (template [MASK] tokens), mean-no-mask"),
    "weights": Option("none", ("none", "idf-target", "idf-ref"), "token weights: none, idf over the target texts (idf^T), idf over WikiText-2 (idf^W)"),
    "filter": Option("none", help="drop tokens: none, biases (= frequent+punct+subword), or a '+'-joined subset", validate=_validate_filter),
    "special": Option("include", ("include", "exclude"), "include [CLS]/[SEP] in means (sentence-transformers does)"),
    "post": Option("none", help="post-processing chain, '+'-joined: zscore, quantile-u, quantile-n, whiten, abtt-D, normalize; '@ref' fits a step on WikiText-2", validate=validate_chain),
}
LAYERS_OPTION = Option("last", help="layers averaged, '+'-joined: -1 (static), 0 (embedding output), 1..L, last", validate=_validate_layers)

POOLED_OPTIONS = {"layers": LAYERS_OPTION, **COMMON_OPTIONS, "template": Option("none", ("none", *TEMPLATES), "prompt template T0–T4 (Table 1)")}
RANDOM_OPTIONS = {
    "seed": Option("0", help="seed of the random token vectors", validate=_validate_int),
    "std": Option("0.1", help="standard deviation of the random token vectors", validate=_validate_float),
    **{key: option for key, option in COMMON_OPTIONS.items() if key != "pool"},
    "pool": Option("mean", ("mean", "max"), "token aggregation: mean or max"),
}
AVG_OPTIONS = {"layers": LAYERS_OPTION, **RANDOM_OPTIONS}
del AVG_OPTIONS["seed"], AVG_OPTIONS["std"]
MIX_OPTIONS = {"w": Option("0.5", help="weight of the Avg vectors in (1-w)·model + w·Avg (Eq. 10); may be negative", validate=_validate_float), **POOLED_OPTIONS}


class PooledMethod(VectorMethod):
    """Token vectors (contextual, static or mixed) → weights and filters → aggregation → post-processing."""

    def __init__(self, spec: MethodSpec) -> None:
        super().__init__(spec)
        self._fitted: tuple[np.ndarray | None, Chain] | None = None

    # -- model and token vectors --------------------------------------------------------------
    @property
    def model(self) -> LoadedModel:
        return load_model(self.parsed.model)

    @property
    def fingerprint(self) -> str:
        return self.model.fingerprint

    @property
    def dimension(self) -> int:
        return self.model.hidden_size

    def _option(self, key: str) -> str:
        return self.parsed.get(key) if key in self.parsed.schema.options else ""

    def _store(self):
        from embedlab.tokens.states import store_for

        return store_for(self.model)

    def _special_ids(self) -> np.ndarray:
        return np.array(sorted(set(self.model.tokenizer.all_special_ids)), dtype=np.int64)

    def token_vectors(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> tuple[FlatTokens, np.ndarray]:
        """Every text's tokens laid flat, and their (T, d) vectors under this method's layers."""
        family = self.parsed.family
        if family == "random":
            flat = self._flat_from_tokenizer(texts)
            table = _random_table(self.model, int(self.parsed.get("seed")), float(self.parsed.get("std")))
            return flat, table[flat.token_ids]
        layers = resolve_layers(self.parsed.get("layers"), self.model.num_layers)
        if family == "avg":
            flat = self._flat_from_tokenizer(texts)
            return flat, _avg_matrix(self.model, layers, flat.token_ids)
        template = get_template(self.parsed.get("template"))
        states = self._store().compute(texts, template=template, batch_size=batch_size, show_progress_bar=show_progress_bar)
        flat = _LAYOUTS.flat(states, self._special_ids())
        matrix = _LAYOUTS.matrix(states, layers)
        if family == "bert+avg":
            w = np.float32(float(self.parsed.get("w")))
            matrix = (1 - w) * matrix + w * _avg_matrix(self.model, layers, flat.token_ids)
        return flat, matrix

    def _flat_from_tokenizer(self, texts: list[str]) -> FlatTokens:
        """Static models need only token ids: the whole text, special tokens added once (no length limit).

        The last few results are remembered, so that several configurations over the same texts
        tokenise them once.
        """
        key = (self.model.fingerprint, tuple(texts))
        if key in _TOKENIZED:
            _TOKENIZED.move_to_end(key)
            return _TOKENIZED[key]
        flat = self._tokenize_flat(texts)
        _TOKENIZED[key] = flat
        while len(_TOKENIZED) > 4:
            _TOKENIZED.popitem(last=False)
        return flat

    def _tokenize_flat(self, texts: list[str]) -> FlatTokens:
        from embedlab.tokens.states import TokenStates

        tokenizer = self.model.tokenizer
        encoded = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"] if texts else []
        states = []
        for ids in encoded:
            full = np.asarray(self.model.with_special_tokens(ids), dtype=np.int64)
            states.append(TokenStates(full, np.zeros((0, len(full), 0), np.float32), np.zeros(len(full), np.int32), np.zeros(len(full), bool)))
        return FlatTokens.from_states(states, self._special_ids())

    # -- weights, filters, pooling --------------------------------------------------------------
    def _excluded_vocab(self) -> np.ndarray | None:
        value = self._option("filter")
        if value in ("", "none"):
            return None
        key = (self.model.fingerprint, value)
        if key not in _EXCLUDED:
            _EXCLUDED[key] = self._build_excluded_vocab(value)
        return _EXCLUDED[key]

    def _build_excluded_vocab(self, value: str) -> np.ndarray:
        names = FILTERS if value == "biases" else value.split("+")
        tokenizer = self.model.tokenizer
        excluded = np.zeros(len(tokenizer), dtype=bool)
        if "frequent" in names:
            _, counts = reference_token_statistics(tokenizer)
            excluded[most_frequent_tokens(counts, tokenizer.all_special_ids)] = True
        if "punct" in names:
            excluded |= punctuation_token_mask(tokenizer)
        if "subword" in names:
            excluded |= subword_token_mask(tokenizer)
        return excluded

    def _pool(self, texts: list[str], idf: np.ndarray | None, batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        flat, matrix = self.token_vectors(texts, batch_size, show_progress_bar)
        keep = select_tokens(flat, self._option("special") == "include", self._excluded_vocab())
        weights = token_weights(flat, keep, idf)
        return aggregate(matrix, flat, weights, keep, self._option("pool"))

    def _target_idf(self, texts: list[str]) -> np.ndarray | None:
        choice = self._option("weights")
        if choice == "idf-ref":
            return reference_token_statistics(self.model.tokenizer)[0]
        if choice == "idf-target":
            flat = self._flat_from_tokenizer(texts)
            documents = np.split(flat.token_ids, flat.offsets[1:-1])
            return idf_from_documents(documents, len(self.model.tokenizer))
        return None

    # -- fitting and encoding ----------------------------------------------------------------------
    def fit(self, texts: Sequence[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> PooledMethod:
        """Learn the target statistics (idf^T, post-processing) from ``texts``."""
        texts = check_texts(texts)
        if not texts:
            raise ValueError("fit needs at least one text")
        idf = self._target_idf(texts)
        pooled = self._pool(texts, idf, batch_size, show_progress_bar)
        chain, _ = self._fit_chain(pooled, idf, batch_size, show_progress_bar)
        self._fitted = (idf, chain)
        return self

    def save_fitted(self, path: str) -> None:
        """Save the statistics learned by ``fit`` (idf^T, post-processing) as safetensors."""
        if self._fitted is None:
            raise RuntimeError(f"{self.spec}: nothing to save, call fit(texts) first")
        idf, chain = self._fitted
        tensors, metadata = chain.to_tensors()
        tensors = {f"post.{key}": value for key, value in tensors.items()}
        if idf is not None:
            tensors["idf"] = idf
        metadata.update(spec=self.spec, fingerprint=self.fingerprint)
        atomic_write_bytes(Path(path), safetensors_save(tensors, metadata=metadata))

    def load_fitted(self, path: str) -> PooledMethod:
        """Restore statistics saved by ``save_fitted`` for this same method and model."""
        tensors, metadata = read_safetensors(path)
        if metadata.get("spec") != self.spec or metadata.get("fingerprint") != self.fingerprint:
            raise ValueError(
                f"{path} holds statistics of {metadata.get('spec')!r} (model {metadata.get('fingerprint')}), "
                f"not of {self.spec!r} (model {self.fingerprint})"
            )
        chain = Chain.from_tensors({key[5:]: value for key, value in tensors.items() if key.startswith("post.")}, metadata)
        self._fitted = (tensors.get("idf"), chain)
        return self

    def _fit_chain(
        self, pooled: np.ndarray, idf: np.ndarray | None, batch_size: int, show_progress_bar: bool | None
    ) -> tuple[Chain, np.ndarray]:
        """The fitted chain and ``pooled`` transformed by it (computed while fitting, not twice)."""
        steps = parse_chain(self._option("post") or "none")
        reference = None
        fitted, current, current_reference = [], pooled, None
        for name, on_reference in steps:
            step = make_step(name)
            if on_reference:
                if reference is None:
                    reference = self._reference_vectors(idf, batch_size, show_progress_bar)
                    current_reference = Chain(fitted).transform(reference) if fitted else reference
                step.fit(current_reference)
            else:
                step.fit(current)
            current = step.transform(current)
            if current_reference is not None:
                current_reference = step.transform(current_reference)
            fitted.append(step)
        return Chain(fitted), current

    def _reference_vectors(self, idf: np.ndarray | None, batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        """Pooled vectors (before post-processing) of a seeded WikiText-2 sample, cached when target-independent."""
        from embedlab.data.wikitext import wikitext2_sentences

        sentences = wikitext2_sentences("train", min_chars=10, unk_token=self.model.tokenizer.unk_token or "<unk>")
        rng = np.random.default_rng(REFERENCE_SEED)
        sample = [sentences[i] for i in np.sort(rng.choice(len(sentences), min(REFERENCE_SENTENCES, len(sentences)), replace=False))]
        pooling_spec = str(self.parsed.replace(post="none"))
        cacheable = self._option("weights") != "idf-target"
        key = hashlib.sha256(f"{pooling_spec}|{self.fingerprint}|{len(sample)}|{REFERENCE_SEED}".encode()).hexdigest()[:24]
        path = cache_dir("reference_vectors") / f"{key}.npy"
        if cacheable and path.exists():
            return np.load(path, allow_pickle=False)
        vectors = self._pool(sample, idf, batch_size, show_progress_bar)
        if cacheable:
            np.save(path, vectors, allow_pickle=False)
        return vectors

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        if self._fitted is None:
            idf = self._target_idf(texts)
            pooled = self._pool(texts, idf, batch_size, show_progress_bar)
            return self._fit_chain(pooled, idf, batch_size, show_progress_bar)[1]
        idf, chain = self._fitted
        return chain.transform(self._pool(texts, idf, batch_size, show_progress_bar))


_RANDOM_TABLES: dict[tuple[str, int, float], np.ndarray] = {}


def _random_table(model: LoadedModel, seed: int, std: float) -> np.ndarray:
    key = (model.fingerprint, seed, std)
    if key not in _RANDOM_TABLES:
        from embedlab.pooling.static import random_token_table

        _RANDOM_TABLES[key] = random_token_table(len(model.tokenizer), model.hidden_size, seed, std)
    return _RANDOM_TABLES[key]


def _avg_matrix(model: LoadedModel, layers: tuple[int, ...], token_ids: np.ndarray) -> np.ndarray:
    from embedlab.pooling.static import avg_tables

    tables = avg_tables(model)
    total = np.asarray(tables[layers[0] + 1][token_ids], dtype=np.float32)
    for layer in layers[1:]:
        total = total + tables[layer + 1][token_ids]
    return total / np.float32(len(layers))


# --- sentence-transformers' own encode ----------------------------------------------------------

class SentenceTransformerMethod(VectorMethod):
    """The baseline: ``SentenceTransformer(model).encode`` exactly as that library does it."""

    _models: dict[str, object] = {}

    @property
    def _model(self):
        from sentence_transformers import SentenceTransformer

        path = str(load_model(self.parsed.model).path)
        if path not in self._models:
            self._models[path] = SentenceTransformer(path, device=str(load_model(self.parsed.model).device))
        return self._models[path]

    @property
    def fingerprint(self) -> str:
        return load_model(self.parsed.model).fingerprint

    @property
    def dimension(self) -> int:
        return int(self._model.get_sentence_embedding_dimension())

    def _encode(self, texts, batch_size, show_progress_bar):
        return self._model.encode(texts, batch_size=batch_size, show_progress_bar=bool(show_progress_bar), convert_to_numpy=True)


# --- concatenation ---------------------------------------------------------------------------------

class ConcatMethod(VectorMethod):
    """Unit-normalised vectors of several methods side by side, scaled so the result has unit norm."""

    def __init__(self, spec: ConcatSpec, parts: Sequence[EmbeddingMethod]) -> None:
        super().__init__(spec)
        self.parts = list(parts)
        pairwise = [str(part.parsed) for part in self.parts if part.pairwise]
        if pairwise:
            raise ValueError(f"cannot concatenate the pairwise method {pairwise[0]!r}: it gives no vectors")

    @property
    def fingerprint(self) -> str:
        return "+".join(part.fingerprint for part in self.parts)

    @property
    def dimension(self) -> int:
        return sum(part.dimension for part in self.parts)

    def _encode(self, texts, batch_size, show_progress_bar):
        blocks = [part.encode(texts, batch_size=batch_size, show_progress_bar=show_progress_bar, normalize=True) for part in self.parts]
        return np.hstack(blocks) / np.float32(np.sqrt(len(blocks)))


# --- the families defined here ---------------------------------------------------------------------

POOLED_FAMILY = Family(POOLED, POOLED_OPTIONS, PooledMethod, "contextual token states of a transformer, pooled")
POOLED_FAMILIES = (
    POOLED_FAMILY,
    Family("random", RANDOM_OPTIONS, PooledMethod, "random N(0, std²) token vectors with the model's tokenizer and width (§3.2.5)"),
    Family("avg", AVG_OPTIONS, PooledMethod, "token vectors averaged over their WikiText-2 contexts (§3.2.3)"),
    Family("bert+avg", MIX_OPTIONS, PooledMethod, "(1-w)·contextual + w·Avg token vectors (Eq. 10)"),
)
ST_FAMILY = Family("st", {}, SentenceTransformerMethod, "sentence-transformers' own encode (baseline)")
