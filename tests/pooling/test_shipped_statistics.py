"""Tests of embedlab.pooling.shipped_statistics: the default model's idf^W and token counts ship with the package,
are used without counting on the train file they were made from, and a damaged file is refused."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from embedlab.data import DataFormatError
from embedlab.data.wikitext import wikitext2_sentences, wikitext2_sha256
from embedlab.pooling import weights
from embedlab.pooling.shipped_statistics import shipped_statistics, statistics_file, tokenizer_sha256
from embedlab.pooling.weights import reference_token_statistics, token_statistics
from embedlab.runtime.cache.arrays import ArrayStore


def no_counting(*args, **kwargs):
    raise AssertionError("the reference statistics were counted, not taken from the shipped file")


def test_the_default_models_statistics_are_used_without_counting(minilm, isolated_cache, monkeypatch):
    """Properties a count over WikiText-2 train must have (scripts/reference_statistics.py --check compares the file
    with a full count): unseen tokens get log N with N the train sentences, special tokens are never counted, the
    commonest tokens are "the", "," and ".", and no token is rarer than in the first 500 sentences alone."""
    monkeypatch.setattr(weights, "_compute_reference_statistics", no_counting)
    idf, counts = reference_token_statistics(minilm.tokenizer)
    sentences = wikitext2_sentences("train", min_chars=1, unk_token=minilm.tokenizer.unk_token)
    assert idf.dtype == np.float64 and counts.dtype == np.int64 and idf.shape == counts.shape == (30522,)
    assert idf.max() == pytest.approx(np.log(len(sentences)), abs=1e-12) and idf.min() >= 0
    tokenizer = minilm.tokenizer
    assert counts[[tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id]].tolist() == [0] * 4
    assert counts[tokenizer.unk_token_id] > 0  # WikiText's <unk>, written as the tokenizer's [UNK]
    assert set(tokenizer.convert_ids_to_tokens(np.argsort(-counts, kind="stable")[:3].tolist())) == {"the", ",", "."}
    _, head_counts = token_statistics(tokenizer, sentences[:500])
    assert np.all(head_counts <= counts) and head_counts.sum() > 10_000
    vocabulary = weights._tokenizer_key(tokenizer)
    assert np.array_equal(ArrayStore("reference").load(f"{vocabulary}-counts-wikitext2"), counts)  # cached as if counted


def test_another_tokenizer_or_train_file_gets_none(minilm):
    from transformers import AutoTokenizer

    assert shipped_statistics(minilm.tokenizer, wikitext2_sha256("train")) is not None
    assert shipped_statistics(minilm.tokenizer, "0" * 64) is None  # another train file: counted as before
    cased = AutoTokenizer.from_pretrained(minilm.tokenizer.name_or_path, do_lower_case=False)
    assert tokenizer_sha256(cased) != tokenizer_sha256(minilm.tokenizer)
    assert shipped_statistics(cased, wikitext2_sha256("train")) is None  # same vocabulary, other normaliser


def copy_with(tmp_path, minilm, **changes) -> None:
    shipped = statistics_file(tokenizer_sha256(minilm.tokenizer))
    with np.load(shipped, allow_pickle=False) as stored:
        fields = {name: stored[name] for name in stored.files}
    np.savez_compressed(statistics_file(tokenizer_sha256(minilm.tokenizer), tmp_path), **{**fields, **changes})


def test_a_damaged_file_is_refused_not_used(minilm, tmp_path, isolated_cache, monkeypatch):
    with np.load(statistics_file(tokenizer_sha256(minilm.tokenizer)), allow_pickle=False) as stored:
        idf = stored["idf"].copy()
    idf[1000] += 0.5
    copy_with(tmp_path, minilm, idf=idf)
    monkeypatch.setattr(weights, "shipped_statistics", functools.partial(shipped_statistics, folder=tmp_path))
    monkeypatch.setattr(weights, "_compute_reference_statistics", no_counting)
    with pytest.raises(DataFormatError, match=r"wikitext2-train-reference-[0-9a-f]{16}\.npz: .*\(damaged\)"):
        reference_token_statistics(minilm.tokenizer)
    copy_with(tmp_path, minilm, counts=np.zeros(5, dtype=np.int64))
    with pytest.raises(DataFormatError, match="float64 and int64 vectors of 30522 tokens"):
        shipped_statistics(minilm.tokenizer, wikitext2_sha256("train"), folder=tmp_path)
    statistics_file(tokenizer_sha256(minilm.tokenizer), tmp_path).write_bytes(b"PK\x03\x04 not a zip archive")
    with pytest.raises(DataFormatError, match="not a readable reference-statistics file"):
        shipped_statistics(minilm.tokenizer, wikitext2_sha256("train"), folder=tmp_path)
