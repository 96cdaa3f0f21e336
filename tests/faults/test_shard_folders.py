"""Shard folders cannot lie: :func:`read_shards` returns vectors only from a complete, gap-free folder whose
shards match their checksums and row counts (or, asked explicitly, the finished rows with a mask); a
manifest entry without a checksum or naming a file outside the folder is refused by name; one run writes
a folder at a time (a lock file with the writer's pid; a stale lock is taken over); the input's identity
is a hash of its whole content; and a resumed run encodes exactly the slices an uninterrupted run would."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from embedlab.engines import shards as shard_module
from embedlab.engines.runner import embed_corpus
from embedlab.engines.shards import OutputFolderError, read_shards
import preloaded  # tests/preloaded.py: child processes forked from a preloaded Python
from tolerance import UNIT_ATOL

LOCK_NAME = getattr(shard_module, "LOCK_NAME", ".embedlab.lock")


@pytest.fixture
def texts_file(tmp_path, sts_sentences):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(sts_sentences[:12]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path, texts_file, isolated_cache):
    out = tmp_path / "out"
    embed_corpus("random:minilm", texts_file, out, shard_size=4, progress=False)
    return out


def _edit(folder, change):
    manifest = json.loads((folder / "manifest.json").read_text())
    change(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_complete_folder_reads_back(folder):
    ids, vectors = read_shards(folder)
    assert ids == list(range(1, 13)) and vectors.shape == (12, 384)


def test_a_partly_finished_folder_is_refused_unless_asked_for_with_a_mask(folder):
    full_ids, full = read_shards(folder)

    def unfinished(manifest):
        manifest["complete"] = False
        manifest["shards"] = [entry for entry in manifest["shards"] if entry["index"] != 0]

    _edit(folder, unfinished)
    with pytest.raises(ValueError, match=r"not complete: 8 of 12 texts .*shard 0 is missing"):
        read_shards(folder)
    ids, vectors, mask = read_shards(folder, partial=True)
    assert vectors.shape == (12, 384) and mask.tolist() == [False] * 4 + [True] * 8
    assert ids[:4] == [None] * 4 and ids[4:] == full_ids[4:]  # row i is still text i
    np.testing.assert_array_equal(vectors[mask], full[4:])
    assert not vectors[~mask].any()


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m["shards"].pop(1), r"shard 1 is missing"),
    (lambda m: m["shards"].append(dict(m["shards"][1])), r"shard 1 is listed twice"),
    (lambda m: m["shards"][2].update(rows=3), r"shard 2 lists 3 rows, expected 4"),
    (lambda m: m["shards"][0].pop("sha256"), r"shard 0's manifest entry has no sha256"),
    (lambda m: m["shards"][0].update(file="../elsewhere.parquet"), r"names a file outside the folder"),
    (lambda m: m["shards"][0].update(file="/tmp/elsewhere.parquet"), r"names a file outside the folder"),
    (lambda m: m.update(texts=16), r"not complete: 12 of 16 texts"),
])
def test_a_lying_manifest_is_refused(folder, change, message):
    _edit(folder, change)
    with pytest.raises(ValueError, match=message):
        read_shards(folder)


def test_a_shard_with_other_rows_than_listed_is_refused(folder, tmp_path):
    from embedlab.engines.parquet_vectors import shard_bytes
    from embedlab.engines.shards import OutputFolder

    payload = bytes(memoryview(shard_bytes([5, 6, 7], np.zeros((3, 384), np.float32))))
    (folder / "shard-00001.parquet").write_bytes(payload)
    import hashlib

    _edit(folder, lambda m: m["shards"][1].update(sha256=hashlib.sha256(payload).hexdigest()))
    with pytest.raises(ValueError, match=r"shard-00001.parquet holds 3 rows; its manifest entry lists 4"):
        read_shards(folder)
    assert OutputFolder(folder).path == folder


def test_a_folder_another_live_run_writes_is_refused(tmp_path, texts_file, isolated_cache):
    out = tmp_path / "out"
    out.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / LOCK_NAME).write_text(json.dumps({"pid": sleeper.pid, "host": os.uname().nodename}))
        with pytest.raises(OutputFolderError, match=rf"another embed run \(pid {sleeper.pid}\) is writing"):
            embed_corpus("random:minilm", texts_file, out, shard_size=4, progress=False)
        assert not (out / "manifest.json").exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    # the writer is gone: its lock is stale, taken over, and released at the end
    result = embed_corpus("random:minilm", texts_file, out, shard_size=4, progress=False)
    assert result.texts == 12 and not (out / LOCK_NAME).exists()


@pytest.mark.crosspath
def test_two_runs_started_together_into_one_folder(tmp_path, texts_file, isolated_cache):
    """Two processes, different specs, one new folder: at most one succeeds and the folder holds its vectors."""
    out = tmp_path / "out"
    script = ("import sys\nfrom embedlab.engines.runner import embed_corpus\n"
              "try:\n    embed_corpus(sys.argv[1], sys.argv[2], sys.argv[3], shard_size=2, progress=False)\n"
              "except ValueError as error:\n    print('refused:', error); sys.exit(3)\n")
    runs = [preloaded.Popen([sys.executable, "-c", script, spec, str(texts_file), str(out)], stdout=subprocess.PIPE, text=True)
            for spec in ("random:minilm", "random:minilm,seed=1")]
    outcomes = [(run.wait(timeout=300), run.stdout.read()) for run in runs]
    succeeded = [spec for spec, (status, _) in zip(("random:minilm", "random:minilm,seed=1"), outcomes) if status == 0]
    assert len(succeeded) >= 1, outcomes
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["spec"] == succeeded[-1]
    import embedlab

    _, vectors = read_shards(out)
    expected = embedlab.load(manifest["spec"]).encode((texts_file.read_text().splitlines()))
    np.testing.assert_allclose(vectors, expected, atol=UNIT_ATOL)  # shards of 2 vs one encode call: float32 rounding


def test_an_edit_after_the_first_mebibyte_is_seen_on_resume(tmp_path, isolated_cache, monkeypatch):
    source = tmp_path / "big.txt"
    lines = [f"line {k} " + "word " * 60 for k in range(4000)]  # about 1.3 MB
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    real_writev = os.writev

    def fail_at_shard_one(descriptor, buffers):
        if "shard-00001.parquet" in os.readlink(f"/proc/self/fd/{descriptor}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writev(descriptor, buffers)

    monkeypatch.setattr(os, "writev", fail_at_shard_one)
    with pytest.raises(OSError):
        embed_corpus("random:minilm", source, out, shard_size=2000, progress=False)
    monkeypatch.setattr(os, "writev", real_writev)
    stat = source.stat()
    with open(source, "r+b") as file:  # same size, same mtime: a change past the first MiB
        file.seek(stat.st_size - 100)
        file.write(b"X")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(OutputFolderError, match="holds another run"):
        embed_corpus("random:minilm", source, out, shard_size=2000, progress=False)


@pytest.mark.crosspath
def test_a_resumed_run_gives_the_same_bits_as_an_uninterrupted_one(tmp_path, sts_test_rows, isolated_cache, monkeypatch):
    texts = list(dict.fromkeys(text for _, a, b in sts_test_rows[:200] for text in (a, b)))[:160]
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n")
    embed_corpus("minilm", source, tmp_path / "whole", shard_size=20, progress=False)
    real_writev = os.writev

    def fail_at_shard_three(descriptor, buffers):
        if "shard-00003.parquet" in os.readlink(f"/proc/self/fd/{descriptor}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writev(descriptor, buffers)

    monkeypatch.setattr(os, "writev", fail_at_shard_three)
    with pytest.raises(OSError):
        embed_corpus("minilm", source, tmp_path / "resumed", shard_size=20, progress=False)
    monkeypatch.setattr(os, "writev", real_writev)
    result = embed_corpus("minilm", source, tmp_path / "resumed", shard_size=20, progress=False)
    assert result.shards_reused == 3
    # bit-identical by construction: both runs encode the same slices (slice_rows of the whole corpus) in this process
    np.testing.assert_array_equal(read_shards(tmp_path / "resumed")[1], read_shards(tmp_path / "whole")[1])
