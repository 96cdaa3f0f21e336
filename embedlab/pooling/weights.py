"""Token weights and token filters of the pooling paper (§3.3).

* idf_t = log(N / df_t) over a set of documents (Eq. 4): idf^T over the target texts, idf^W over
  the reference corpus (WikiText-2 train sentences). A token absent from the documents gets
  log(N), the idf of a token seen once, so that unseen words count as rare rather than vanish.
* "-biases" filters (after PromptBERT): the most frequent tokens, punctuation, and subword tokens.
  PromptBERT's appendix list of 33 frequent tokens is not available here, so we take the 33 most
  frequent non-special tokens of the reference corpus under the model's own tokenizer.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable

import numpy as np

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.runtime import cache_dir

FREQUENT_TOKEN_COUNT = 33


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
        raise ValueError("idf needs at least one document")
    return np.log(num_documents / np.maximum(frequencies, 1)).astype(np.float64)


def idf_from_documents(documents: Iterable[np.ndarray], vocab_size: int) -> np.ndarray:
    return idf_from_frequencies(*document_frequencies(documents, vocab_size))


_TOKENIZER_KEYS: dict[int, tuple[object, str]] = {}


def _tokenizer_key(tokenizer) -> str:
    """A hash of the vocabulary, remembered per tokenizer object (hashing 30k entries is not free)."""
    remembered = _TOKENIZER_KEYS.get(id(tokenizer))
    if remembered is not None and remembered[0] is tokenizer:
        return remembered[1]
    key = _vocabulary_hash(tokenizer)
    _TOKENIZER_KEYS[id(tokenizer)] = (tokenizer, key)  # holding the tokenizer keeps its id from being reused
    return key


def _vocabulary_hash(tokenizer) -> str:
    vocab = tokenizer.get_vocab()
    digest = hashlib.sha256()
    for token, index in sorted(vocab.items(), key=lambda item: item[1]):
        digest.update(f"{index}\t{token}\n".encode("utf-8"))
    return digest.hexdigest()[:16]


def reference_token_statistics(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(idf^W, token counts) over WikiText-2 train sentences for this tokenizer, cached as .npy."""
    folder = cache_dir("reference", _tokenizer_key(tokenizer))
    idf_path, counts_path = folder / "idf_wikitext2.npy", folder / "counts_wikitext2.npy"
    if idf_path.exists() and counts_path.exists():
        return np.load(idf_path, allow_pickle=False), np.load(counts_path, allow_pickle=False)
    sentences = wikitext2_sentences("train", min_chars=1, unk_token=tokenizer.unk_token or "<unk>")
    encoded = tokenizer(sentences, add_special_tokens=False, verbose=False)["input_ids"]
    vocab_size = len(tokenizer)
    counts = np.bincount(np.concatenate([np.asarray(ids, dtype=np.int64) for ids in encoded]), minlength=vocab_size)
    idf = idf_from_documents((np.asarray(ids) for ids in encoded), vocab_size)
    for path, array in ((idf_path, idf), (counts_path, counts)):
        temporary = path.with_suffix(".tmp.npy")
        np.save(temporary, array, allow_pickle=False)
        temporary.replace(path)
    return idf, counts


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
