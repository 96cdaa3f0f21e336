"""The local engine: a shard folder holds exactly what one ``encode`` call gives, a run killed with
SIGKILL resumes at the first unfinished shard without touching finished ones, and fitted specs are
fitted once on the whole corpus."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import embedlab
from embedlab.engines.plan import slice_rows
from embedlab.engines.runner import embed_corpus
from embedlab.engines.shards import OutputFolderError, read_shards
from embedlab.errors import InputError
import preloaded  # tests/preloaded.py: child processes forked from a preloaded Python
from tolerance import UNIT_ATOL

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent


@pytest.fixture
def corpus_file(tmp_path, sts_sentences) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{index}", "text": text}) + "\n" for index, text in enumerate(sts_sentences[:30])))
    return path


@pytest.mark.crosspath
def test_sharded_output_equals_one_encode_call(tmp_path, corpus_file, sts_sentences, isolated_cache):
    result = embed_corpus("minilm", corpus_file, tmp_path / "out", shard_size=8, progress=False)
    assert (result.texts, result.shards_written, result.shards_reused) == (30, 4, 0)
    assert not list(isolated_cache.rglob("*.pack"))  # the shards are the result: no token states cached for them
    ids, vectors = read_shards(tmp_path / "out")
    assert ids == [f"s{index}" for index in range(30)]
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous and vectors.shape == (30, 384)
    expected = embedlab.load("minilm").encode(sts_sentences[:30])
    assert np.abs(vectors - expected).max() <= UNIT_ATOL  # shards of 8 vs one batch of 30: other padding, float32 rounding
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["complete"] and [entry["rows"] for entry in manifest["shards"]] == [8, 8, 8, 6]
    assert manifest["spec"] == "minilm" and manifest["code_version"].startswith(embedlab.__version__)
    last = pq.read_table(tmp_path / "out" / "shard-00003.parquet")
    assert last.column_names == ["id", "vector", "text_hash"]
    digests = [hashlib.blake2b(text.encode(), digest_size=8).digest() for text in sts_sentences[24:30]]
    assert last.column("text_hash").to_pylist() == [int.from_bytes(digest, "little") for digest in digests]


@pytest.mark.crosspath
def test_a_target_fitted_spec_is_fitted_once_on_the_whole_corpus(tmp_path, corpus_file, sts_sentences, isolated_cache):
    spec = "minilm:weights=idf-target,post=zscore+normalize"
    embed_corpus(spec, corpus_file, tmp_path / "out", shard_size=12, progress=False)
    _, vectors = read_shards(tmp_path / "out")
    # one encode call on all 30 texts fits idf^T and z-score on all of them; shards of 12 must not refit
    expected = embedlab.load(spec).encode(sts_sentences[:30])
    assert np.abs(vectors - expected).max() <= UNIT_ATOL  # shards of 12 vs one batch of 30: float32 rounding (unit vectors)
    per_shard = embedlab.load(spec).encode(sts_sentences[:12])  # 12: a target-fitted z-score takes 10 texts at least
    assert np.abs(vectors[:12] - per_shard).max() > 1e-3  # what fitting each shard on itself would have given
    assert (tmp_path / "out" / "fitted-0.safetensors").is_file()


def test_a_rerun_of_a_finished_folder_recomputes_nothing(tmp_path, corpus_file, isolated_cache, monkeypatch):
    embed_corpus("minilm", corpus_file, tmp_path / "out", shard_size=10, progress=False)
    mtimes = {path.name: path.stat().st_mtime_ns for path in (tmp_path / "out").glob("shard-*")}
    monkeypatch.setattr("embedlab.methods.base.VectorMethod.encode", lambda *a, **k: pytest.fail("encoded a finished shard"))
    result = embed_corpus("minilm", corpus_file, tmp_path / "out", shard_size=10, progress=False)
    assert (result.shards_written, result.shards_reused) == (0, 3)
    assert {path.name: path.stat().st_mtime_ns for path in (tmp_path / "out").glob("shard-*")} == mtimes


def test_another_spec_or_input_is_refused_unless_overwrite(tmp_path, corpus_file, isolated_cache):
    embed_corpus("minilm", corpus_file, tmp_path / "out", shard_size=10, progress=False)
    with pytest.raises(OutputFolderError, match="holds another run.*spec: 'minilm' there, 'random:minilm' now"):
        embed_corpus("random:minilm", corpus_file, tmp_path / "out", shard_size=10, progress=False)
    with corpus_file.open("a") as file:
        file.write(json.dumps({"id": "extra", "text": "One more sentence."}) + "\n")
    with pytest.raises(OutputFolderError, match="holds another run.*input"):
        embed_corpus("minilm", corpus_file, tmp_path / "out", shard_size=10, progress=False)
    result = embed_corpus("random:minilm", corpus_file, tmp_path / "out", shard_size=10, progress=False, overwrite=True)
    assert (result.texts, result.shards_written, result.shards_reused) == (31, 4, 0)
    assert read_shards(tmp_path / "out")[0][-1] == "extra"


def test_int8_shards_equal_sentence_transformers_quantisation_over_the_whole_input(tmp_path, corpus_file, sts_sentences,
                                                                                    isolated_cache, monkeypatch):
    from sentence_transformers import quantize_embeddings

    spec = "random:minilm,precision=int8,truncate_dim=64"
    embed_corpus(spec, corpus_file, tmp_path / "out", shard_size=8, normalize=True, progress=False)
    ids, vectors = read_shards(tmp_path / "out")
    # one range for all four shards: the cut float32 vectors, unit length after the cut, over all 30 texts
    floats = embedlab.load("random:minilm").encode(sts_sentences[:30], truncate_dim=64, normalize_embeddings=True)
    expected = quantize_embeddings(floats, precision="int8")
    assert vectors.dtype == np.int8 and ids[0] == "s0"
    np.testing.assert_array_equal(vectors, expected)
    assert np.abs(vectors[:8].astype(int) - quantize_embeddings(floats[:8], precision="int8").astype(int)).max() > 0  # not per shard
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["precision"], manifest["truncate_dim"], manifest["dimension"]) == ("int8", 64, 64)
    np.testing.assert_array_equal(np.asarray(manifest["ranges"], np.float32), np.vstack((floats.min(0), floats.max(0))))
    # a resumed run quantises its shards with the stored ranges and encodes nothing else
    (tmp_path / "out" / "shard-00003.parquet").unlink()
    encoded: list[int] = []
    original = embedlab.methods.base.VectorMethod.encode
    monkeypatch.setattr("embedlab.methods.base.VectorMethod.encode",
                        lambda self, texts, **options: encoded.append(len(texts)) or original(self, texts, **options))
    embed_corpus(spec, corpus_file, tmp_path / "out", shard_size=8, normalize=True, progress=False)
    assert sum(encoded) == 6  # the last shard only (in slices), no second pass for the ranges
    np.testing.assert_array_equal(read_shards(tmp_path / "out")[1], expected)


def test_binary_shards_pack_the_cut_vectors_bits(tmp_path, corpus_file, sts_sentences, isolated_cache):
    embed_corpus("random:minilm,precision=ubinary,truncate_dim=128", corpus_file, tmp_path / "out", shard_size=16, progress=False)
    _, vectors = read_shards(tmp_path / "out")
    floats = embedlab.load("random:minilm").encode(sts_sentences[:30])[:, :128]
    assert vectors.dtype == np.uint8 and vectors.shape == (30, 16)
    np.testing.assert_array_equal(np.unpackbits(vectors, axis=1), (floats > 0).astype(np.uint8))
    assert "ranges" not in json.loads((tmp_path / "out" / "manifest.json").read_text())


@pytest.mark.slow
@pytest.mark.crosspath
def test_a_run_killed_with_sigkill_resumes_at_the_first_unfinished_shard(tmp_path, sts_test_rows, isolated_cache):
    """24 shards of 10 texts (240 texts: the shard count, not the text count, gives the kill its margin) still
    catch a resume that rewrites finished shards, loses or reorders rows, leaves .tmp files, or changes a
    vector by a single bit against the shard-by-shard reference."""
    texts = list(dict.fromkeys(text for _, a, b in sts_test_rows for text in (a, b)))[:240]
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
                   "EMBEDLAB_CACHE": str(tmp_path / "subprocess-cache")}
    process = preloaded.Popen([sys.executable, "-m", "embedlab", "embed", "minilm", "--input", str(source), "--out", str(out),
                               "--shard-size", "10", "--quiet"], env=environment, cwd=REPO_ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and process.poll() is None:
            manifest = out / "manifest.json"
            if manifest.exists() and len(json.loads(manifest.read_text())["shards"]) >= 2:
                break
            time.sleep(0.02)
        assert process.poll() is None, f"the run ended before it could be killed: {process.stderr.read().decode()}"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    killed = json.loads((out / "manifest.json").read_text())
    finished = {entry["file"] for entry in killed["shards"]}
    assert 2 <= len(finished) < 24 and not killed["complete"]
    mtimes = {name: (out / name).stat().st_mtime_ns for name in finished}

    result = embed_corpus("minilm", source, out, shard_size=10, progress=False)
    assert result.shards_reused == len(finished) and result.shards_written == 24 - len(finished)
    assert {name: (out / name).stat().st_mtime_ns for name in finished} == mtimes  # finished shards untouched
    assert not [path for path in out.iterdir() if path.name.endswith(".tmp")]
    ids, vectors = read_shards(out)
    assert ids == list(range(1, 241))
    # bit-identical by construction: both runs encode each 10-text shard in one call (slice_rows(240) = 15 ≥ 10),
    # so the shard-by-shard reference has the same batches, padding, kernels and thread count
    assert slice_rows(240) >= 10
    method = embedlab.load("minilm")
    np.testing.assert_array_equal(vectors, np.vstack([method.encode(texts[start:start + 10]) for start in range(0, 240, 10)]))
    # and one encode of all 240 texts (batches of 32, other padding) differs by float32 rounding only
    assert np.abs(vectors - method.encode(texts)).max() <= UNIT_ATOL
