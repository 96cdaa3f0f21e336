"""Token weights and token filters of the pooling paper (§3.3).

* idf_t = log(N / df_t) over a set of documents (Eq. 4): idf^T over the target texts, idf^W over
  the reference corpus (WikiText-2 train sentences). A token absent from the documents gets
  log(N), the idf of a token seen once, so that unseen words count as rare rather than vanish.
* "-biases" filters (after PromptBERT): the most frequent tokens, punctuation, and subword tokens.
  PromptBERT's appendix list of 33 frequent tokens is not available here, so we take the 33 most
  frequent non-special tokens of the reference corpus under the model's own tokenizer.

Reference statistics are cached per vocabulary in the checksummed ``ArrayStore("reference")``; the default
model's are shipped with the package (:mod:`embedlab.pooling.shipped_statistics`) and copied there, not counted.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable

import numpy as np

from embedlab.data.wikitext import wikitext2_sentences, wikitext2_sha256
from embedlab.errors import InputError
from embedlab.pooling.shipped_statistics import shipped_statistics
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.locks import building
from embedlab.runtime.memo import memo

FREQUENT_TOKEN_COUNT = 33
FILTERS = ("frequent", "punct", "subword")
"""Token filters by name; ``biases`` is all three (PromptBERT's -biases)."""

_VOCABULARY_HASHES = memo("vocabulary hashes")
_EXCLUDED_VOCABULARIES = memo("excluded vocabularies")


def document_frequencies(documents: Iterable[np.ndarray], vocab_size: int) -> tuple[np.ndarray, int]:
    """How many documents contain each token id, and the number of documents."""
    frequencies = np.zeros(vocab_size, dtype=np.int64)
    count = 0
    for token_ids in documents:
        frequencies[np.unique(np.asarray(token_ids, dtype=np.int64))] += 1
        count += 1
    return frequencies, count


def idf_from_frequencies(frequencies: np.ndarray, num_documents: int) -> np.ndarray:
    if num_documents < 1:
        raise InputError("idf needs at least one document")
    return np.log(num_documents / np.maximum(frequencies, 1)).astype(np.float64)


def idf_from_documents(documents: Iterable[np.ndarray], vocab_size: int) -> np.ndarray:
    return idf_from_frequencies(*document_frequencies(documents, vocab_size))


def _tokenizer_key(tokenizer) -> str:
    """A hash of the vocabulary, remembered per tokenizer object (hashing 30k entries is not free).

    The memo entry holds the tokenizer itself, so its ``id`` cannot be reused by another object while
    the entry lives.
    """
    return _VOCABULARY_HASHES.get(id(tokenizer), lambda: (tokenizer, _vocabulary_hash(tokenizer)))[1]


def _vocabulary_hash(tokenizer) -> str:
    vocab = tokenizer.get_vocab()
    digest = hashlib.sha256()
    for token, index in sorted(vocab.items(), key=lambda item: item[1]):
        digest.update(f"{index}\t{token}\n".encode("utf-8"))
    return digest.hexdigest()[:16]


def reference_token_statistics(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(idf^W, token counts) over WikiText-2 train sentences for this tokenizer, cached on disk."""
    store, vocabulary = ArrayStore("reference"), _tokenizer_key(tokenizer)
    idf, counts = store.load(f"{vocabulary}-idf-wikitext2"), store.load(f"{vocabulary}-counts-wikitext2")
    if idf is not None and counts is not None:
        return idf, counts
    with building(store.path(f"{vocabulary}-idf-wikitext2")):  # another process building them: wait for its files
        idf, counts = store.load(f"{vocabulary}-idf-wikitext2"), store.load(f"{vocabulary}-counts-wikitext2")
        if idf is not None and counts is not None:
            return idf, counts
        shipped = shipped_statistics(tokenizer, wikitext2_sha256("train"))  # the default model's: no counting
        if shipped is not None:
            for name, array in zip(("idf", "counts"), shipped):
                store.save(f"{vocabulary}-{name}-wikitext2", array)
            return shipped
        return _compute_reference_statistics(tokenizer, store, vocabulary)


def _compute_reference_statistics(tokenizer, store: ArrayStore, vocabulary: str) -> tuple[np.ndarray, np.ndarray]:
    sentences = wikitext2_sentences("train", min_chars=1, unk_token=tokenizer.unk_token or "<unk>")
    idf, counts = token_statistics(tokenizer, sentences)
    store.save(f"{vocabulary}-idf-wikitext2", idf)
    store.save(f"{vocabulary}-counts-wikitext2", counts)
    return idf, counts


def token_statistics(tokenizer, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(idf, token counts) of ``sentences`` (each one document) under ``tokenizer``, special tokens not added."""
    # ids only: the attention masks and token types the tokenizer would also build are a sixth of its time here
    encoded = tokenizer(sentences, add_special_tokens=False, verbose=False, return_attention_mask=False,
                        return_token_type_ids=False)["input_ids"]
    documents = [np.asarray(ids, dtype=np.int64) for ids in encoded]
    vocab_size = len(tokenizer)
    counts = np.bincount(np.concatenate(documents), minlength=vocab_size)
    return idf_from_documents(documents, vocab_size), counts


def most_frequent_tokens(counts: np.ndarray, special_ids: Iterable[int], k: int = FREQUENT_TOKEN_COUNT) -> np.ndarray:
    """The ``k`` most frequent non-special token ids (ties broken by id, for determinism)."""
    counts = counts.astype(np.int64).copy()
    counts[list(special_ids)] = -1
    order = np.lexsort((np.arange(len(counts)), -counts))
    return np.sort(order[:k])


def _is_punctuation(token: str) -> bool:
    stripped = token[2:] if token.startswith("##") else token.lstrip("\u0120\u2581")
    return bool(stripped) and all(unicodedata.category(char)[0] in "PS" for char in stripped)


def punctuation_token_mask(tokenizer) -> np.ndarray:
    """Vocabulary tokens made only of punctuation or symbol characters."""
    mask = np.zeros(len(tokenizer), dtype=bool)
    for token, index in tokenizer.get_vocab().items():
        mask[index] = _is_punctuation(token)
    return mask


def subword_token_mask(tokenizer) -> np.ndarray:
    """Vocabulary tokens that continue a word.

    WordPiece marks continuations with '##'; byte-level BPE (Ġ) and SentencePiece (▁) instead mark
    word starts, so there a continuation is a non-special token without the start marker.
    """
    vocab = tokenizer.get_vocab()
    special = set(tokenizer.all_special_tokens)
    wordpiece = any(token.startswith("##") for token in vocab)
    mask = np.zeros(len(tokenizer), dtype=bool)
    for token, index in vocab.items():
        if token in special:
            continue
        mask[index] = token.startswith("##") if wordpiece else not token.startswith(("\u0120", "\u2581"))
    return mask


def excluded_vocabulary(tokenizer, filters: str) -> np.ndarray | None:
    """(V,) bool, read-only: the vocabulary tokens that ``filters`` drops; None when it is ``none``.

    ``filters`` is ``none``, ``biases`` (all of :data:`FILTERS`) or a '+'-joined subset of them. The mask is
    remembered per vocabulary and choice: every configuration with the same filter shares it.
    """
    if filters == "none":
        return None
    return _EXCLUDED_VOCABULARIES.get((_tokenizer_key(tokenizer), filters), lambda: _excluded_mask(tokenizer, filters))


def _excluded_mask(tokenizer, filters: str) -> np.ndarray:
    names = FILTERS if filters == "biases" else filters.split("+")
    excluded = np.zeros(len(tokenizer), dtype=bool)
    if "frequent" in names:
        _, counts = reference_token_statistics(tokenizer)
        excluded[most_frequent_tokens(counts, tokenizer.all_special_ids)] = True
    if "punct" in names:
        excluded |= punctuation_token_mask(tokenizer)
    if "subword" in names:
        excluded |= subword_token_mask(tokenizer)
    excluded.flags.writeable = False  # shared by every method with this filter
    return excluded
