"""model2vec folders read by embedlab (`static:`): same vectors as model2vec's own encode, clear errors on bad folders."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import save_file

import embedlab
from embedlab.models.named import ModelNotFoundError, static_model_path
from embedlab.pooling.static_folders import StaticModelError, load_static_model
from embedlab.runtime.memo import clear
from tolerance import UNIT_ATOL, scaled_atol

model2vec = pytest.importorskip("model2vec")


@pytest.fixture(scope="module")
def tokenlearn_folder():
    return static_model_path("tokenlearn")


def _model2vec_folder(path, minilm, *, dtype=np.float32, quantised=False, normalize=False, width=8):
    """A small model2vec model with MiniLM's tokenizer, saved by model2vec itself."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(minilm.tokenizer.backend_tokenizer.to_str())
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(0)
    if quantised:  # vocabulary quantisation: 50 rows shared through a mapping, one weight per token
        table = rng.integers(-100, 100, size=(50, width)).astype(dtype)
        mapping, weights = rng.integers(0, 50, size=vocab), rng.uniform(0.1, 2.0, size=vocab).astype(np.float32)
    else:
        table = (rng.normal(size=(vocab, width)) * (50 if dtype == np.int8 else 1)).astype(dtype)
        mapping = weights = None
    model = model2vec.StaticModel(table, tokenizer, normalize=normalize, weights=weights, token_mapping=mapping)
    model.save_pretrained(path)
    return path


@pytest.mark.crosspath
def test_tokenlearn_package_model_gives_model2vecs_own_vectors(tokenlearn_folder, sts_sentences):
    """int8 table, 10,000 rows shared by 276,326 tokens through a mapping, per-token weights, normalize."""
    texts = [*sts_sentences, "", "...", "Zürich 漢字 ✓ 123"]
    ours = embedlab.load("static:tokenlearn").encode(texts)
    reference = model2vec.StaticModel.from_pretrained(str(tokenlearn_folder)).encode(texts)
    assert ours.dtype == np.float32 and ours.shape == (len(texts), 64)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=UNIT_ATOL)  # model2vec's mean and norm vs ours: float32 rounding
    np.testing.assert_array_equal(ours[len(sts_sentences)], np.zeros(64))  # empty text: zero, as model2vec


@pytest.mark.crosspath
def test_many_texts_are_tokenised_on_threads_even_with_tokenizers_parallelism_off(tokenlearn_folder, sts_sentences, monkeypatch):
    """model2vec sets TOKENIZERS_PARALLELISM=false for the whole process once it encodes > 10,000 texts; a single
    batch call would then run on one core. Batches go to a thread pool instead, and the vectors are unchanged."""
    import threading

    from embedlab.pooling import static_folders

    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setattr(static_folders, "TOKENIZE_BATCH", 7, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # two usable cores
    texts = [f"{text} ({index})" for index, text in enumerate(sts_sentences)]  # new texts: no tokenisation memo
    method = embedlab.load("static:tokenlearn")
    backend = method.model.tokenizer.backend
    callers: set[int] = set()
    lock, both_running = threading.Lock(), threading.Barrier(2, timeout=60)

    class Recording:  # the Rust tokenizer's methods cannot be patched; wrap it
        def __getattr__(self, name):
            return getattr(backend, name)

        def encode_batch_fast(self, batch, **kwargs):
            assert len(batch) <= 7
            with lock:
                first_call = threading.get_ident() not in callers
                callers.add(threading.get_ident())
            if first_call:  # each thread's first batch waits for the other thread: two tokenise at once
                both_running.wait()
            return backend.encode_batch_fast(batch, **kwargs)

    monkeypatch.setattr(method.model.tokenizer, "backend", Recording())
    ours = method.encode(texts)
    assert len(callers) == 2 and threading.get_ident() not in callers  # two worker threads
    reference = model2vec.StaticModel.from_pretrained(str(tokenlearn_folder)).encode(texts)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=UNIT_ATOL)  # unit vectors, float32 rounding


@pytest.mark.crosspath
def test_a_path_equals_the_named_model_and_options_compose(tokenlearn_folder, sts_sentences):
    named = embedlab.load("static:tokenlearn")
    by_path = embedlab.load(f"static:{tokenlearn_folder}")
    np.testing.assert_array_equal(named.encode(sts_sentences), by_path.encode(sts_sentences))  # bit-identical: one folder, one code path
    raw = embedlab.load("static:tokenlearn,normalize=no").encode(sts_sentences)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), named.encode(sts_sentences), atol=UNIT_ATOL)  # unit vectors
    zscored = embedlab.load("static:tokenlearn,normalize=no,post=zscore").encode(sts_sentences)
    np.testing.assert_allclose(zscored, (raw - raw.mean(0)) / raw.std(0), atol=scaled_atol(zscored))  # z-scores: float32 rounding at their scale


@pytest.mark.parametrize("kind", ["float", "int8", "quantised", "normalized"])
def test_any_model2vec_folder_gives_model2vecs_vectors(tmp_path, minilm, sts_sentences, kind):
    folder = _model2vec_folder(tmp_path / kind, minilm, dtype=np.int8 if kind in ("int8", "quantised") else np.float32,
                               quantised=kind == "quantised", normalize=kind == "normalized")
    texts = [*sts_sentences, "an [UNK] token and \u2603 snow", " ".join(sts_sentences)]  # the last: > 128 tokens,
    reference = model2vec.StaticModel.from_pretrained(str(folder)).encode(texts)  # where MiniLM's tokenizer.json truncates
    # unnormalised int8-scale vectors (|v| up to ~100): model2vec sums hundreds of tokens in float32, hence rtol 1e-5
    np.testing.assert_allclose(embedlab.load(f"static:{folder}").encode(texts), reference, rtol=1e-5, atol=1e-5)


def test_idf_weights_on_top_weight_each_token(tmp_path, minilm):
    folder = _model2vec_folder(tmp_path / "m", minilm)
    texts = ["the cat sat", "the dog ran", "a cat ran"]
    static = load_static_model(str(folder))
    vectors = embedlab.load(f"static:{folder},weights=idf-target").fit(texts).encode(texts)  # 3 texts: fitted explicitly
    ids = [minilm.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    documents = [set(item) for item in ids]
    idf = {t: np.log(3 / sum(t in d for d in documents)) for d in documents for t in d}
    for vector, tokens in zip(vectors, ids):
        weights = np.array([idf[t] for t in tokens])
        np.testing.assert_allclose(vector, (weights[:, None] * static.table[tokens]).sum(0) / weights.sum(), rtol=1e-5, atol=1e-6)


def test_a_folder_without_model2vec_files_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(StaticModelError, match="not a model2vec model: it has no model.safetensors, tokenizer.json"):
        embedlab.load(f"static:{tmp_path}")
    with pytest.raises(StaticModelError, match="no such folder"):
        embedlab.load(f"static:{tmp_path / 'missing'}")


def test_a_transformer_folder_is_not_a_static_model_and_vice_versa(minilm, tokenlearn_folder):
    with pytest.raises(StaticModelError, match="transformer model folder .*'bert'"):
        embedlab.load(f"static:{minilm.path}")
    with pytest.raises(ModelNotFoundError, match="static .*model2vec.* use it as static:"):
        embedlab.load(f"avg:{tokenlearn_folder}")
    with pytest.raises(ModelNotFoundError, match="use it as static:tokenlearn"):
        embedlab.load("tokenlearn")


def test_a_table_that_disagrees_with_its_tokenizer_is_refused_before_work(tmp_path, minilm):
    folder = _model2vec_folder(tmp_path / "m", minilm)
    tokens = 30522
    save_file({"embeddings": np.zeros((tokens - 1, 8), np.float32)}, folder / "model.safetensors")
    with pytest.raises(StaticModelError, match="table has 30521 rows but tokenizer.json has 30522 tokens"):
        load_static_model(str(folder))
    save_file({"embeddings": np.zeros((10, 8), np.float32), "mapping": np.zeros(tokens - 5, np.int64)}, folder / "model.safetensors")
    with pytest.raises(StaticModelError, match="'mapping' has shape"):
        load_static_model(str(folder))
    save_file({"embeddings": np.zeros((10, 8), np.float32), "mapping": np.full(tokens, 10, np.int64)}, folder / "model.safetensors")
    with pytest.raises(StaticModelError, match="points outside the table's 10 rows"):
        load_static_model(str(folder))
    save_file({"embeddings": np.zeros((tokens, 8), np.float32), "weights": np.ones(3, np.float32)}, folder / "model.safetensors")
    with pytest.raises(StaticModelError, match="'weights' has shape"):
        load_static_model(str(folder))
    save_file({"embeddings": np.zeros((tokens, 8), np.float32)}, folder / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_dim": 16}))
    with pytest.raises(StaticModelError, match="hidden_dim is 16 but the table is 8 wide"):
        load_static_model(str(folder))
    shutil.copy(minilm.path / "config.json", folder / "config.json")
    with pytest.raises(StaticModelError, match="transformer model folder"):
        embedlab.load(f"static:{folder}")


@pytest.mark.crosspath
def test_a_truncation_saved_in_tokenizer_json_does_not_cut_texts(tmp_path, minilm, sts_sentences):
    """MiniLM's tokenizer.json carries truncation at 128 tokens: a static model still pools every token,
    and a folder written by embedlab carries no truncation or padding."""
    from embedlab.pooling.static_folders import write_static_folder

    folder = _model2vec_folder(tmp_path / "m", minilm)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    long_text = " ".join(sts_sentences[:10])
    reference = model2vec.StaticModel.from_pretrained(str(folder)).encode([long_text], max_length=None)
    np.testing.assert_allclose(embedlab.load(f"static:{folder}").encode([long_text]), reference, rtol=0, atol=scaled_atol(reference))  # float32 rounding
    write_static_folder(tmp_path / "out", np.zeros((30522, 4)), json.dumps(tokenizer), {"normalize": False})
    written = json.loads((tmp_path / "out" / "tokenizer.json").read_text())
    assert written["truncation"] is None and written["padding"] is None


@pytest.mark.parametrize("options", ["", ",weights=idf-ref", ",weights=idf-target,post=zscore"])
def test_many_texts_are_pooled_batch_by_batch_with_the_same_bits(sts_sentences, monkeypatch, options):
    """The static path tokenises and sums batches of texts on the cores: each text's vector is the one the
    whole list in one batch gives, bit for bit, whatever the batch size (an idf fit tokenises the whole list
    first, and pooling then reuses those tokens)."""
    from embedlab.pooling import pipeline

    texts = [f"{text} [{index}]" for index, text in enumerate(sts_sentences)]  # new texts: no tokenisation memo
    reference_calls = []

    def seeded_reference_statistics(tokenizer):
        """idf^W stand-in: seeded weights spread as real idf is (0.5 to 10), not the tokenlearn vocabulary's
        statistics over WikiText-2 train (≈ 8 CPU s of tokenising, paid by this test alone); the subject here is
        that the weights of batches and of the whole list agree, which any non-uniform weights show."""
        reference_calls.append(tokenizer)
        return np.random.default_rng(5).uniform(0.5, 10.0, size=len(tokenizer)), np.ones(len(tokenizer), dtype=np.int64)

    monkeypatch.setattr(pipeline, "reference_token_statistics", seeded_reference_statistics)
    monkeypatch.setattr(pipeline, "STATIC_BATCH_TEXTS", 10**9)
    whole = embedlab.load("static:tokenlearn" + options).encode(texts)
    monkeypatch.setattr(pipeline, "STATIC_BATCH_TEXTS", 9)
    clear()
    batched = embedlab.load("static:tokenlearn" + options).encode(texts)
    assert batched.dtype == np.float32 and batched.shape == (len(texts), 64)
    assert np.array_equal(batched, whole)
    assert len(reference_calls) == (2 if "idf-ref" in options else 0)  # idf-ref weights come from idf^W, once per load
