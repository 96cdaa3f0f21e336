"""The pooled pipeline as composable stages (pooling paper §3), the way sentence-transformers composes
Transformer → Pooling → Normalize:

1. a token source (:mod:`embedlab.pooling.sources`): flat tokens and one vector per token;
2. :class:`TokenSelection`: which tokens take part (special tokens, -biases filters) and their
   weights (none, idf^T over the target texts, idf^W over WikiText-2), §3.3;
3. an aggregation (:func:`embedlab.pooling.aggregation.aggregate`): mean, cls, max, mask, mean-no-mask, §3.1;
4. a post-processing chain (:mod:`embedlab.pooling.postprocess`), §3.4.

:class:`PoolingPipeline` holds the four and knows nothing of specs or families; the pooled method
(:mod:`embedlab.methods.pooled`) builds one from a spec. What the target texts determine — idf^T and
the fitted chain — is not part of the pipeline but passed in (``idf``) or returned (``fit_post``), so one
pipeline serves any number of fits.

Stages 1–3 stream: :meth:`PoolingPipeline.pool` takes the texts a chunk at a time (about
``STREAM_CHARACTERS`` characters, so a chunk's token states are a bounded number of MB whatever the
corpus), turns the chunk's token states into its pooled vectors and lets them go. Every stage 2–3
statistic is per text or given (idf over all the target texts comes from a tokenisation pass, not from
token states), so the vectors equal a one-shot pass; post-processing is fitted on the pooled vectors of
all texts, which are small. A list of texts shorter than one chunk (STS-B test is 160,000 characters) is
pooled in one piece, as before, so the research grid's shared layouts still apply.

Static sources (random, Avg, a model2vec table) with mean aggregation take a fast path: the texts are
tokenised in one batch and pooled by one sparse (texts × table rows) product with the table, an
EmbeddingBag-style weighted sum; no (T, d) matrix of token vectors is built, no token state exists. It
is the same arithmetic as the general path (tested equal to 1e-6).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from embedlab.errors import InputError
from embedlab.models.loading import LoadedModel
from embedlab.pooling import long_texts
from embedlab.pooling.aggregation import FlatTokens, aggregate, select_tokens, token_weights
from embedlab.pooling.postprocess import MIN_TARGET_VECTORS, Chain, ChainStep, fit_chain
from embedlab.pooling.sources import TokenSource, release_layouts, tokenized_already, tokenized_texts
from embedlab.pooling.weights import idf_from_documents, reference_token_statistics
from embedlab.runtime.memory import release_free_memory
from embedlab.runtime.progress import progress_bar

WEIGHTINGS = ("none", "idf-target", "idf-ref")
# Characters of text pooled per chunk: ≈ 60,000 word pieces, ≈ 90 MB of one layer's float32 states at d = 384.
STREAM_CHARACTERS = 1 << 18


def stream_chunks(texts: Sequence[str], characters: int = STREAM_CHARACTERS) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive runs of texts holding about ``characters`` characters each (at
    least one text per run: a book-length text is a run of its own)."""
    start, size = 0, 0
    for index, text in enumerate(texts):
        size += len(text)
        if size >= characters:
            yield start, index + 1
            start, size = index + 1, 0
    if start < len(texts):
        yield start, len(texts)


@dataclass(frozen=True, eq=False)
class TokenSelection:
    """Stage 2: tokens kept (special tokens in or out, a vocabulary mask dropped) and how they are weighted."""

    include_special: bool = True
    excluded_vocab: np.ndarray | None = None
    weighting: str = "none"

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise InputError(f"unknown token weighting {self.weighting!r}; choose one of: {', '.join(WEIGHTINGS)}")

    def idf(self, model: LoadedModel, texts: Sequence[str]) -> np.ndarray | None:
        """The idf this weighting uses with ``texts`` as the target: idf^T over them, idf^W, or None."""
        if self.weighting == "idf-ref":
            return reference_token_statistics(model.tokenizer)[0]
        if self.weighting == "idf-target":
            flat = tokenized_texts(model, texts)
            return idf_from_documents(np.split(flat.token_ids, flat.offsets[1:-1]), len(model.tokenizer))
        return None


@dataclass(frozen=True, eq=False)
class PoolingPipeline:
    """Token source → selection and weights → aggregation → post-processing."""

    source: TokenSource
    selection: TokenSelection
    aggregation: str = "mean"
    post: tuple[ChainStep, ...] = ()  # parse_chain's steps: name, fitted on the reference corpus

    @property
    def model(self) -> LoadedModel:
        return self.source.model

    @property
    def depends_on_texts(self) -> bool:
        """Whether fitting learns statistics of the target texts themselves (idf^T, a step fitted without @ref)."""
        return self.selection.weighting == "idf-target" or any(
            not step.on_reference and step.needs_fit for step in self.post)

    def target_minimum(self) -> tuple[int, str]:
        """The fewest texts the target-fitted statistics can be fitted on, and which statistic asks the most
        (``(0, "")`` when nothing is fitted on the target): idf^T's document frequencies and each step's
        :meth:`~embedlab.pooling.postprocess.PostProcessor.min_target_vectors`."""
        needs = [(MIN_TARGET_VECTORS, "weights=idf-target")] if self.selection.weighting == "idf-target" else []
        needs += [(step.min_target_vectors(self.source.width), f"post={step.name}") for step in self.post]
        return max((need for need in needs if need[0] > 0), default=(0, ""))

    @property
    def unit_vectors(self) -> bool:
        """Whether every vector has unit length: the chain ends in a step whose output rows do (``normalize``)."""
        return bool(self.post) and self.post[-1].unit_output

    def idf(self, texts: Sequence[str]) -> np.ndarray | None:
        """Stage 2's idf with ``texts`` as the target (see :meth:`TokenSelection.idf`)."""
        return self.selection.idf(self.model, texts)

    def pool(
        self,
        texts: list[str],
        idf: np.ndarray | None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        chunk_characters: int = STREAM_CHARACTERS,
    ) -> np.ndarray:
        """Stages 1–3: (n, d) pooled vectors, before post-processing, streamed chunk by chunk (see the
        module docstring); only one chunk's token vectors are held at a time."""
        if self.static_fast_path:  # the static path holds token ids only, never vectors
            return self._pool_static(texts, idf, show_progress_bar)
        long = long_texts.long_positions(self.source, texts)  # a book-length text streams a group of its chunks at a time
        if long:
            return long_texts.pool_around_long_texts(
                self.source, self.selection, self.aggregation, texts, long, idf,
                lambda rest: self.pool(rest, idf, batch_size, show_progress_bar, chunk_characters), batch_size)
        chunks = list(stream_chunks(texts, chunk_characters))
        if len(chunks) <= 1:
            return self._pool_chunk(texts, idf, batch_size, show_progress_bar)
        pooled: np.ndarray | None = None
        with progress_bar(total=len(texts), desc="encoding", unit="text", disable=not show_progress_bar) as progress:
            for start, stop in chunks:
                try:
                    piece = self._pool_chunk(texts[start:stop], idf, batch_size, False)
                except ValueError as error:  # "text at index i" of the chunk is text start + i of the call
                    message = re.sub(r"text at index (\d+)", lambda match: f"text at index {int(match[1]) + start}", str(error))
                    raise (InputError if isinstance(error, InputError) else ValueError)(message) from error
                if pooled is None:
                    pooled = np.empty((len(texts), piece.shape[1]), dtype=piece.dtype)
                pooled[start:stop] = piece
                release_layouts()
                release_free_memory()
                progress.update(stop - start)
        return pooled

    @property
    def static_fast_path(self) -> bool:
        """Whether stages 1–3 are one sparse product with a static table (see the module docstring)."""
        return self.source.static and self.aggregation == "mean"

    def _pool_chunk(self, texts: list[str], idf: np.ndarray | None, batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        if self.static_fast_path:
            return self._pool_static(texts, idf, show_progress_bar)
        flat, matrix = self.source.token_vectors(texts, batch_size, show_progress_bar)
        keep = select_tokens(flat, self.selection.include_special, self.selection.excluded_vocab)
        return aggregate(matrix, flat, token_weights(flat, keep, idf), keep, self.aggregation)

    def _pool_static(self, texts: list[str], idf: np.ndarray | None, show_progress_bar: bool | None = None) -> np.ndarray:
        """A static source's vectors: token ids in, one weighted sum of table rows per text out. Many texts
        are tokenised and summed batch by batch on the cores (the tokenizer, numpy and scipy release the
        GIL), unless their tokens are remembered already (an idf fit on the same texts tokenised them)."""
        # once per call, not per batch (a multi-layer Avg table is a fresh layer average); a table built on
        # first use draws its bar as the caller asked
        table = self.source.table(show_progress_bar)
        if len(texts) <= STATIC_BATCH_TEXTS or tokenized_already(self.model, texts):
            return self._pool_static_tokens(tokenized_texts(self.model, texts), idf, table)
        batches = [texts[start : start + STATIC_BATCH_TEXTS] for start in range(0, len(texts), STATIC_BATCH_TEXTS)]
        with ThreadPoolExecutor(max_workers=min(len(os.sched_getaffinity(0)), len(batches))) as pool:
            parts = pool.map(lambda batch: self._pool_static_tokens(tokenized_texts(self.model, batch, remember=False), idf, table), batches)
            return np.concatenate(list(parts))

    def _pool_static_tokens(self, flat: FlatTokens, idf: np.ndarray | None, table: np.ndarray) -> np.ndarray:
        source = self.source
        keep = select_tokens(flat, self.selection.include_special, self.selection.excluded_vocab)
        weights = token_weights(flat, keep, idf)
        rows, scales = source.lookup(flat.token_ids)
        coefficients = weights.astype(np.float64) if scales is None else weights * scales.astype(np.float64)
        return _static_sums(coefficients, rows, np.asarray(flat.offsets, dtype=np.int64), table, precise=bool(self.post))

    def fit_post(self, pooled: np.ndarray, reference: Callable[[], np.ndarray]) -> tuple[Chain, np.ndarray]:
        """Stage 4 fitted on ``pooled`` (``@ref`` steps on ``reference()``): the chain and ``pooled`` transformed."""
        return fit_chain(self.post, pooled, reference)


# Texts per batch of the static path: tokenised and summed on one thread each (≈ 1,000 texts a batch keep
# two cores busy on 20,000 sentences, and a batch's float64 rows small).
STATIC_BATCH_TEXTS = 1024


def _static_sums(coefficients: np.ndarray, rows: np.ndarray, offsets: np.ndarray, table: np.ndarray,
                 precise: bool = True) -> np.ndarray:
    """(n, d) float32: text i's Σ coefficients[j] · table[rows[j]] over its tokens offsets[i]:offsets[i + 1].

    ``precise``: summed in float64 over the table rows the texts use. A float32 running sum over a long text
    loses ~1e-7 of its magnitude: harmless in the pooled vector itself (model2vec sums in float32 too), but a
    post-processing step such as whitening (scales up to ~10³) lifts it above 1e-5."""
    if not precise:
        selector = csr_matrix((coefficients.astype(np.float32), rows, offsets), shape=(len(offsets) - 1, table.shape[0]))
        return np.asarray(selector @ table, dtype=np.float32)
    used = np.zeros(table.shape[0], dtype=bool)
    used[rows] = True
    used_rows = np.flatnonzero(used)
    columns = (np.cumsum(used) - 1)[rows]
    selector = csr_matrix((coefficients, columns, offsets), shape=(len(offsets) - 1, len(used_rows)))
    return np.asarray(selector @ table[used_rows].astype(np.float64), dtype=np.float32)
