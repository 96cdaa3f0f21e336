"""Stage 1 of pooling: token sources, each giving every text's tokens laid flat and one vector per token.

The pooling paper's token vectors (§3.1–3.2) come from four sources:

* :class:`ContextualTokens` — the model's token states, averaged over chosen layers (Eq. 3), with an
  optional prompt template (Table 1);
* :class:`RandomTokens` — one random N(0, std²) vector per vocabulary token (§3.2.5);
* :class:`AvgTokens` — each token's states averaged over its WikiText-2 contexts (§3.2.3);
* :class:`MixedTokens` — (1 − w)·contextual + w·static per token (Eq. 10);
* :class:`DistilledTokens` — each vocabulary token alone through the model, as model2vec distils;
* :class:`ImportedStaticTokens` — the table of a model2vec folder (:mod:`embedlab.pooling.static_folders`).

Static sources (random, Avg, imported) are one table looked up by token id: they answer ``table()`` and
``lookup(token_ids)`` (rows and per-token scales) as well, which is what the pipeline's fast static path
uses to pool with one sparse product, no (T, d) matrix.

Every source answers ``token_vectors(texts, batch_size, show_progress_bar) -> (FlatTokens, (T, d) matrix)``,
and says itself what the later stages (:mod:`embedlab.pooling.pipeline`, :mod:`embedlab.pooling.long_texts`)
may do with it: ``static`` (a table looked up by token id: the fast sparse path), ``streams`` (contextual
states, whose long texts stream through ``contextual`` chunk by chunk, each chunk's layer average then
passed through ``mix(matrix, token_ids)``). The stages never ask which source they were given.

Many configurations over the same texts share the work: the contextual source lays out one list of
token states and averages their layers once (:class:`TokenLayout`), static sources tokenise a list
of texts once. Both memos live in :mod:`embedlab.runtime`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from embedlab.errors import InputError
from embedlab.models.loading import LoadedModel
from embedlab.pooling.aggregation import FlatTokens
from embedlab.pooling.static import avg_tables, distilled_table, model_random_table
from embedlab.pooling.static_folders import StaticModelFolder, token_ids_in_batches
from embedlab.runtime.memo import memo
from embedlab.tokens.entry import TokenStates
from embedlab.tokens.store import store_for
from embedlab.tokens.templates import Template

_LAYOUTS = memo("token layouts", maxsize=1)
_TOKENIZED = memo("tokenized texts", maxsize=4)


class TokenSource(Protocol):
    """What the pooling pipeline needs from stage 1."""

    model: LoadedModel
    static: bool  # a table looked up by token id (StaticTokens): pooled by one sparse product
    streams: bool  # contextual states: a long text streams through ``contextual``, each chunk through ``mix``
    templated: bool  # its texts run through a ``template`` field, which a prompt may replace

    @property
    def width(self) -> int:
        """The width of its token vectors (the pooled vector's, before post-processing)."""
        ...

    def token_vectors(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> tuple[FlatTokens, np.ndarray]:
        """Every text's tokens laid flat, and their (T, d) float32 vectors."""
        ...


def special_token_ids(model: LoadedModel) -> np.ndarray:
    """The tokenizer's special token ids ([CLS], [SEP], [PAD], [MASK] …), sorted."""
    return np.array(sorted(set(model.tokenizer.all_special_ids)), dtype=np.int64)


def resolve_layers(layers: str, num_layers: int) -> tuple[int, ...]:
    """``"1+last"`` -> (1, L); layers run from -1 (static token embeddings) to L."""
    resolved = []
    for item in layers.split("+"):
        layer = num_layers if item == "last" else int(item)
        if not -1 <= layer <= num_layers:
            raise InputError(f"layer {item} is outside -1..{num_layers} for this model")
        resolved.append(layer)
    return tuple(resolved)


def mean_of_layers(layers: Iterable[np.ndarray]) -> np.ndarray:
    """The mean of one array per layer (Eq. 3's layer average), summed in order and divided once in float32:
    the one formula of every token source, Avg tables and streamed long texts included. A lazy iterable holds
    one layer at a time beside the running sum."""
    iterator = iter(layers)
    total = next(iterator)
    count = 1
    for array in iterator:
        total = total + array
        count += 1
    return total / np.float32(count) if count > 1 else total


def layer_matrix(states: Sequence[TokenStates], layers: Sequence[int]) -> np.ndarray:
    """(T, d): each token's vector averaged over ``layers`` (e.g. first+last, Eq. 3)."""
    return mean_of_layers(np.concatenate([item.layer(layer) for item in states]) for layer in layers)


class TokenLayout:
    """The flat layout and layer matrices of one list of token states, each computed once.

    Many pooling configurations over the same texts receive the same ``TokenStates`` objects from the
    store; laying them flat and concatenating their layers is then done once, not once per configuration.
    The layout holds the states it was built from, so their ids cannot be reused while it lives
    (:func:`layout_of` finds it by those ids). Matrices are kept up to ``matrix_limit_bytes``; results
    are read-only arrays.
    """

    def __init__(self, states: Sequence[TokenStates], matrix_limit_bytes: int = 1 << 30) -> None:
        self.states = tuple(states)
        self.matrix_limit_bytes = matrix_limit_bytes
        self._flat: dict[bytes, FlatTokens] = {}
        self._matrices: dict[tuple[int, ...], np.ndarray] = {}

    def flat(self, special_ids: np.ndarray) -> FlatTokens:
        key = np.asarray(special_ids, dtype=np.int64).tobytes()
        if key not in self._flat:
            self._flat[key] = FlatTokens.from_states(self.states, special_ids)
        return self._flat[key]

    def matrix(self, layers: Sequence[int]) -> np.ndarray:
        key = tuple(layers)
        if key not in self._matrices:
            matrix = layer_matrix(self.states, key)
            matrix.flags.writeable = False
            if sum(m.nbytes for m in self._matrices.values()) + matrix.nbytes > self.matrix_limit_bytes:
                self._matrices.clear()
            self._matrices[key] = matrix
        return self._matrices[key]


def layout_of(states: Sequence[TokenStates]) -> TokenLayout:
    """The shared layout of this exact list of token states (the most recent one is remembered)."""
    return _LAYOUTS.get(tuple(map(id, states)), lambda: TokenLayout(states))


def release_layouts() -> None:
    """Forget the remembered layout (and the token states it holds): a streamed encode calls this after
    each chunk, whose layout no later configuration can share, so that one chunk at a time is held."""
    _LAYOUTS.clear()


def tokenized_texts(model: LoadedModel, texts: Sequence[str], remember: bool = True) -> FlatTokens:
    """Texts as token ids only, laid flat: the whole text, special tokens added once (no length limit).

    Static sources and idf^T need nothing more. The last few results are remembered (unless ``remember``
    is false: one batch of many), so that several configurations over the same texts tokenise them once.
    """

    def tokenize() -> FlatTokens:
        if isinstance(model, StaticModelFolder):  # model2vec's tokenisation: no special tokens, unknown dropped
            return model.flat_tokens(texts)
        encoded = token_ids_in_batches(
            lambda batch: model.tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"], texts) if texts else []
        sequences = [np.asarray(model.with_special_tokens(ids), dtype=np.int64) for ids in encoded]
        return FlatTokens.from_token_ids(sequences, special_token_ids(model))

    return _TOKENIZED.get((model.fingerprint, tuple(texts)), tokenize) if remember else tokenize()


def tokenized_already(model: LoadedModel, texts: Sequence[str]) -> bool:
    """Whether :func:`tokenized_texts` remembers these texts' tokens."""
    return (model.fingerprint, tuple(texts)) in _TOKENIZED


@dataclass(frozen=True, eq=False)
class ContextualTokens:
    """Token states of ``model`` (cached per text and layer, only ``layers`` kept), averaged over ``layers``,
    with an optional prompt template; ``max_tokens`` cuts each text to its first ``max_tokens`` input tokens
    (special tokens included) instead of chunking a long text."""

    model: LoadedModel
    layers: tuple[int, ...]
    template: Template | None = None
    max_tokens: int | None = None
    static = False
    streams = True
    templated = True

    @property
    def width(self) -> int:
        return self.model.hidden_size

    @property
    def contextual(self) -> ContextualTokens:
        """The contextual states a long text streams through: these."""
        return self

    def mix(self, matrix: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
        """A chunk's token vectors from its layer-averaged states: the states themselves."""
        return matrix

    def token_vectors(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> tuple[FlatTokens, np.ndarray]:
        states = store_for(self.model).compute(texts, template=self.template, batch_size=batch_size,
                                               show_progress_bar=show_progress_bar, layers=self.layers, max_tokens=self.max_tokens)
        layout = layout_of(states)
        return layout.flat(special_token_ids(self.model)), layout.matrix(self.layers)


@dataclass(frozen=True, eq=False)
class PromptSetTokens:
    """Token states of each text under several prompt templates (MetaEOL's meta-task prompts), joined as
    the chunks of one text: ``pool=last`` then averages the prompts' last tokens, as MetaEOL does."""

    model: LoadedModel
    layers: tuple[int, ...]
    templates: tuple[Template, ...]
    max_tokens: int | None = None
    static = False
    streams = False  # the prompts' chunks join into one text: a long text is pooled whole
    templated = False

    @property
    def width(self) -> int:
        return self.model.hidden_size

    def token_vectors(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> tuple[FlatTokens, np.ndarray]:
        store = store_for(self.model)
        runs = [store.compute(texts, template=template, batch_size=batch_size, show_progress_bar=show_progress_bar,
                              layers=self.layers, max_tokens=self.max_tokens) for template in self.templates]
        joined = [_as_chunks(list(states)) for states in zip(*runs)]
        return FlatTokens.from_states(joined, special_token_ids(self.model)), layer_matrix(joined, self.layers)


def _as_chunks(parts: list[TokenStates]) -> TokenStates:
    """One text's states under several prompts, laid end to end with the chunk ids kept apart."""
    chunk_ids, offset = [], 0
    for part in parts:
        chunk_ids.append(part.chunk_ids + offset)
        offset += int(part.chunk_ids.max()) + 1 if part.num_tokens else 0
    return TokenStates(np.concatenate([part.token_ids for part in parts]), np.concatenate([part.states for part in parts], axis=1),
                       np.concatenate(chunk_ids).astype(np.int32), np.concatenate([part.template_mask for part in parts]), parts[0].layers)


class StaticTokens:
    """A source whose token vectors depend on the token id only: the texts are tokenised, never run.

    Token ``t``'s vector is ``scales[t] · table()[rows[t]]`` with ``rows, scales = lookup(ids)`` (scales
    None: all 1)."""

    model: LoadedModel
    static = True
    streams = False  # token ids only, never a matrix of states
    templated = False

    @property
    def width(self) -> int:
        return self.model.hidden_size

    def table(self, show_progress_bar: bool | None = None) -> np.ndarray:
        """(R, d) float32 table of token vectors (read-only); a table built on first use draws its progress
        bar as ``show_progress_bar`` says (``encode``'s argument)."""
        raise NotImplementedError

    def lookup(self, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows of :meth:`table` and per-token scales (None: 1) of ``token_ids``."""
        return token_ids, None

    def vectors(self, token_ids: np.ndarray, show_progress_bar: bool | None = None) -> np.ndarray:
        """(T, d) float32 vectors of ``token_ids``."""
        rows, scales = self.lookup(token_ids)
        gathered = self.table(show_progress_bar)[rows]
        return gathered if scales is None else gathered * scales[:, None]

    def token_vectors(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> tuple[FlatTokens, np.ndarray]:
        flat = tokenized_texts(self.model, texts)
        return flat, self.vectors(flat.token_ids, show_progress_bar)


@dataclass(frozen=True, eq=False)
class RandomTokens(StaticTokens):
    """Random N(0, std²) token vectors with the model's tokenizer and its width, or ``dim`` (§3.2.5)."""

    model: LoadedModel
    seed: int = 0
    std: float = 0.1
    dim: int | None = None

    @property
    def width(self) -> int:
        return self.dim if self.dim is not None else self.model.hidden_size

    def table(self, show_progress_bar: bool | None = None) -> np.ndarray:
        return model_random_table(self.model, self.seed, self.std, self.dim)


@dataclass(frozen=True, eq=False)
class AvgTokens(StaticTokens):
    """Token vectors averaged over their WikiText-2 contexts (§3.2.3), then over ``layers``."""

    model: LoadedModel
    layers: tuple[int, ...]

    def table(self, show_progress_bar: bool | None = None) -> np.ndarray:
        tables = avg_tables(self.model, show_progress_bar=show_progress_bar)  # float32: row 0 is layer -1
        return mean_of_layers(tables[layer + 1] for layer in self.layers)

    def vectors(self, token_ids: np.ndarray, show_progress_bar: bool | None = None) -> np.ndarray:
        tables = avg_tables(self.model, show_progress_bar=show_progress_bar)
        return mean_of_layers(tables[layer + 1][token_ids] for layer in self.layers)


@dataclass(frozen=True, eq=False)
class DistilledTokens(StaticTokens):
    """Each token's vector from its one-token context, last layer mean-pooled (model2vec's distillation)."""

    model: LoadedModel

    def table(self, show_progress_bar: bool | None = None) -> np.ndarray:
        return distilled_table(self.model, show_progress_bar=show_progress_bar)


@dataclass(frozen=True, eq=False)
class ImportedStaticTokens(StaticTokens):
    """The token table of a model2vec folder, with its token mapping and weights (model2vec's arithmetic)."""

    model: StaticModelFolder

    def table(self, show_progress_bar: bool | None = None) -> np.ndarray:
        return self.model.table

    def lookup(self, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        return self.model.lookup(token_ids)


@dataclass(frozen=True, eq=False)
class MixedTokens:
    """v = (1 − w)·v_contextual + w·v_static per token (Eq. 10, BERT+Avg); ``w`` may be negative."""

    contextual: ContextualTokens
    static_part: StaticTokens
    w: float
    static = False
    streams = True
    templated = False

    @property
    def width(self) -> int:
        return self.model.hidden_size

    @property
    def model(self) -> LoadedModel:
        return self.contextual.model

    def mix(self, matrix: np.ndarray, token_ids: np.ndarray, show_progress_bar: bool | None = None) -> np.ndarray:
        """(1 − w)·``matrix`` + w·(the static vectors of ``token_ids``): Eq. 10, its one home."""
        w = np.float32(self.w)
        return (1 - w) * matrix + w * self.static_part.vectors(token_ids, show_progress_bar)

    def token_vectors(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> tuple[FlatTokens, np.ndarray]:
        flat, matrix = self.contextual.token_vectors(texts, batch_size, show_progress_bar)
        return flat, self.mix(matrix, flat.token_ids, show_progress_bar)
