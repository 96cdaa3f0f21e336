"""Two processes building the same per-machine cache entry at once (two test workers, two CLI runs), one of
them killed with SIGKILL in the middle of the build: the other waits for the build lock instead of computing
beside it, takes over when the first dies, and its values equal a clean single-process build.

Each case runs the real code in two child processes sharing one private cache: a generic ``ArrayStore.get``
entry and the unpacking of a split-zip model (as all-mpnet-base-v2 is unpacked into the cache), whose builders
are killed halfway through writing (that half-written file is never read, and is swept as an orphan), and the
WikiText-2 reference statistics (idf^W and token counts), whose builder is killed while computing them (over
train's first sentences only: the whole of train costs ≈ 6 CPU s of tokenising, and the lock does not care).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import embedlab
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.atomic import remove_orphan_temporaries
from embedlab.runtime.memo import clear
from child_helpers import expect_line
import preloaded

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent

CHILD = textwrap.dedent("""
    import hashlib, os, shutil, sys, time
    from pathlib import Path
    import numpy as np
    from embedlab.models import named
    from embedlab.models.loading import resolve_model_path
    from embedlab.pooling import weights
    from embedlab.runtime.cache import atomic
    from embedlab.runtime.cache.arrays import ArrayStore

    role, what = sys.argv[1], sys.argv[2]

    def hang(*args, **kwargs):
        print("building", flush=True)
        time.sleep(600)

    if role == "killed":  # stop halfway through writing the entry (or, below, computing it), holding its lock
        if what == "unpack":
            original_copy = shutil.copyfileobj
            def copy_then_hang(source, target, length=0):
                original_copy(source, target, length)
                hang()
            shutil.copyfileobj = copy_then_hang
        else:
            def write_half_then_hang(descriptor, buffers):
                view = memoryview(buffers[0]).cast("B")
                os.write(descriptor, bytes(view[: max(1, len(view) // 2)]))
                hang()
            atomic._write_all = write_half_then_hang

    def announce(function):  # the moment this process starts computing the entry itself
        def wrapper(*args, **kwargs):
            print("computing", repr(time.time()), flush=True)
            return function(*args, **kwargs)
        return wrapper

    def digest(*arrays):
        hasher = hashlib.sha256()
        for array in arrays:
            hasher.update(np.ascontiguousarray(array).tobytes())
        return hasher.hexdigest()

    print("waiting", flush=True)
    if what != "reference":
        print("ready", flush=True)
    if what == "array":
        array = ArrayStore("static").get("shared-entry", announce(lambda: np.arange(200_000, dtype=np.float32) / 7))
        print("result", digest(array), flush=True)
    elif what == "reference":
        from transformers import AutoTokenizer
        from embedlab.data.wikitext import wikitext2_sentences
        # the statistics of train's first sys.argv[3] sentences: the race is about the lock, not the corpus
        weights.wikitext2_sentences = lambda split, min_chars=10, unk_token="<unk>": (
            wikitext2_sentences(split, min_chars, unk_token)[: int(sys.argv[3])])
        weights.shipped_statistics = lambda tokenizer, corpus_sha256: None  # count them: the race is the subject
        # the killed one dies while computing (holding the lock, nothing written yet); the survivor computes
        compute = hang if role == "killed" else weights._compute_reference_statistics
        weights._compute_reference_statistics = announce(compute)
        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
        print("ready", flush=True)
        print("result", digest(*weights.reference_token_statistics(tokenizer)), flush=True)
    else:
        named.join_split_zip = announce(named.join_split_zip)  # where unpack_split_zip_once looks it up
        parts = sorted(Path(sys.argv[3]).glob("model.zip.*"))
        target = named.unpack_split_zip_once(lambda: parts, Path(sys.argv[4]))
        files = sorted(path for path in target.rglob("*") if path.is_file() and path.name != ".complete")
        print("result", hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest(), flush=True)
""")


def start(role: str, what: str, cache: Path, *arguments: str) -> preloaded.Popen:
    environment = {**os.environ, "EMBEDLAB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    return preloaded.Popen([sys.executable, "-c", CHILD, role, what, *arguments], env=environment,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def race_with_a_kill(what: str, cache: Path, *arguments: str) -> str:
    """Start a builder and stop it halfway through building; start a second builder of the same entry; kill
    the first with SIGKILL; return the second's result digest, after checking that it began computing only
    once the first was dead (it waited for the lock instead of building beside it)."""
    killed = start("killed", what, cache, *arguments)
    try:
        expect_line(killed, "waiting")
        expect_line(killed, "ready")
        expect_line(killed, "computing")
        expect_line(killed, "building")  # halfway through its file, holding the build lock
        survivor = start("survivor", what, cache, *arguments)
        expect_line(survivor, "waiting")
        expect_line(survivor, "ready")  # imported, about to ask for the entry
        time.sleep(2.0)  # time enough to compute the entry, if it did not wait
        assert survivor.poll() is None, survivor.communicate()
    finally:
        killed.kill()  # SIGKILL: no cleanup handler runs, the kernel drops its lock
        killed.wait()
    killed_at = time.time()
    assert killed.returncode == -9
    output, errors = survivor.communicate(timeout=600)
    assert survivor.returncode == 0, errors[-3000:]
    lines = output.splitlines()
    computing = [line for line in lines if line.startswith("computing")]
    assert len(computing) == 1, lines
    assert float(computing[0].split()[1]) >= killed_at - 0.5, "the second builder computed while the first held the lock"
    return next(line.split()[1] for line in lines if line.startswith("result"))


def digest(*arrays: np.ndarray) -> str:
    hasher = hashlib.sha256()
    for array in arrays:
        hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()


def assert_no_orphans_after_a_sweep(cache: Path) -> None:
    """The killed builder's half-written temporary file is gone once a process has swept the folder (the
    survivor, if its first use of the folder came after the kill, or the next process)."""
    clear()
    for folder in {path.parent for path in cache.rglob(".*.tmp")}:
        remove_orphan_temporaries(folder)
    assert not list(cache.rglob(".*.tmp"))


def test_an_array_entry_built_by_two_processes_one_killed_is_built_once_and_right(isolated_cache) -> None:
    expected = np.arange(200_000, dtype=np.float32) / 7
    assert race_with_a_kill("array", isolated_cache) == digest(expected)
    assert_no_orphans_after_a_sweep(isolated_cache)
    np.testing.assert_array_equal(ArrayStore("static").load("shared-entry"), expected)


REFERENCE_SENTENCES = 2000  # of WikiText-2 train: what the racing builders and the clean build count


def test_reference_statistics_built_by_two_processes_one_killed_equal_a_clean_build(minilm, isolated_cache, tmp_path,
                                                                                     monkeypatch) -> None:
    from embedlab.data.wikitext import wikitext2_sentences
    from embedlab.pooling import weights

    monkeypatch.setattr(weights, "wikitext2_sentences", lambda split, min_chars=10, unk_token="<unk>": (
        wikitext2_sentences(split, min_chars, unk_token)[:REFERENCE_SENTENCES]))  # as the children do
    monkeypatch.setattr(weights, "shipped_statistics", lambda tokenizer, corpus_sha256: None)
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "clean"))
    clear()
    clean_idf, clean_counts = weights.reference_token_statistics(minilm.tokenizer)  # a single-process build
    assert 0 < clean_counts.sum() < 200_000  # the small corpus, not the whole of train (≈ 2.4 M tokens)
    clean = digest(clean_idf, clean_counts)
    monkeypatch.setenv("EMBEDLAB_CACHE", str(isolated_cache))
    clear()
    assert race_with_a_kill("reference", isolated_cache, str(REFERENCE_SENTENCES)) == clean
    assert_no_orphans_after_a_sweep(isolated_cache)
    clear()

    def not_again(*args, **kwargs):
        raise AssertionError("the survivor's files were not read back: the statistics were computed again")

    monkeypatch.setattr(weights, "_compute_reference_statistics", not_again)
    assert digest(*weights.reference_token_statistics(minilm.tokenizer)) == clean  # read back from the survivor's files


def test_a_model_unpacked_by_two_processes_one_killed_is_complete(tmp_path) -> None:
    archive = tmp_path / "model.zip"
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("model/config.json", '{"model_type": "bert"}')
        bundle.writestr("model/weights.bin", rng.bytes(3 << 20))
    payload = archive.read_bytes()
    parts = tmp_path / "parts"
    parts.mkdir()
    for index in range(3):
        (parts / f"model.zip.00{index + 1}").write_bytes(payload[index * len(payload) // 3 : (index + 1) * len(payload) // 3])
    with zipfile.ZipFile(archive) as bundle:
        expected = hashlib.sha256(b"".join(bundle.read(name) for name in sorted(bundle.namelist()))).hexdigest()
    target = tmp_path / "cache" / "models" / "model"
    target.parent.mkdir(parents=True)
    assert race_with_a_kill("unpack", tmp_path / "cache", str(parts), str(target)) == expected
    assert (target / ".complete").exists()
    assert not [path for path in target.parent.iterdir() if ".staging-" in path.name]  # the killed one's was swept
