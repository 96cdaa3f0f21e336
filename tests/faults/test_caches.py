"""Caches under real faults: no damaged, truncated, swapped, half-written or
foreign cache file is ever read back as a value; each is named in a warning and recomputed to the clean value.
A damaged token-state index is moved aside and rebuilt, a damaged results database is one CLI line naming it,
an unwritable cache (read-only, full) warns once and the values are still right, and the temporary files of a
killed writer are removed.

Every fault is injected into the real files the code wrote (flipped bytes, truncation, swapped index rows,
garbage in SQLite files, a full or read-only filesystem, ``kill -9`` of a child process mid-write), with the real
default model on a few STS-B sentences.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest

import embedlab
from embedlab.evaluation import scoring
from embedlab.results.database import ResultsDB
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.memo import clear
from embedlab.runtime.settings import cache_dir
from embedlab.tokens.packs import PackStore
from embedlab.tokens.store import TokenStateStore
import preloaded  # tests/preloaded.py: child processes forked from a preloaded Python
from tolerance import UNIT_ATOL

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent


# --- helpers: damage a real file ------------------------------------------------------------------------

def flip_middle(path: Path) -> None:
    """XOR a run of bytes in the second half of the file (array data, not the header)."""
    payload = bytearray(path.read_bytes())
    start = len(payload) // 2
    for index in range(start, min(start + 64, len(payload))):
        payload[index] ^= 0x5A
    path.write_bytes(bytes(payload))


def flip_last(path: Path) -> None:
    payload = bytearray(path.read_bytes())
    payload[-1] ^= 0x01
    path.write_bytes(bytes(payload))


def garble_header(path: Path) -> None:
    payload = bytearray(path.read_bytes())
    payload[8:24] = b"\xff" * 16
    path.write_bytes(bytes(payload))


def truncate_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def truncate_empty(path: Path) -> None:
    path.write_bytes(b"")


ARRAY_FAULTS = {"flip-middle": flip_middle, "flip-last": flip_last, "garbage-header": garble_header,
                "truncate-half": truncate_half, "truncate-empty": truncate_empty}


def recompute_warns(path: Path):
    """Expect one RuntimeWarning that names the damaged file."""
    return pytest.warns(RuntimeWarning, match=f"damaged cache file .*{path.name}")


# --- item 1: every ArrayStore cache (eval, neural slices, static tables, reference statistics) ------------

@pytest.fixture(scope="module")
def sts_pairs(sts_test_rows) -> list[str]:
    return [text for _, first, second in sts_test_rows[:6] for text in (first, second)]


def _vector_entries(cache) -> list:
    """The eval cache's vector entries (each has a ``<key>-cost`` entry beside it: what computing it cost)."""
    return [path for path in (cache / "eval").glob("*.safetensors") if not path.stem.endswith("-cost")]


@pytest.mark.parametrize("fault", sorted(ARRAY_FAULTS))
@pytest.mark.crosspath
def test_a_damaged_eval_cache_file_is_recomputed_to_the_clean_value(fault, sts_pairs, isolated_cache) -> None:
    method = embedlab.load("minilm")
    clean = scoring.encode_texts(method, sts_pairs)
    [path] = _vector_entries(isolated_cache)
    ARRAY_FAULTS[fault](path)
    clear()
    with recompute_warns(path):
        again = scoring.encode_texts(embedlab.load("minilm"), sts_pairs)
    np.testing.assert_allclose(again, clean, atol=UNIT_ATOL)  # recomputed from stored or fresh token states: float32 rounding
    np.testing.assert_array_equal(ArrayStore("eval").load(path.stem), again)  # rewritten intact


@pytest.mark.crosspath
def test_an_eval_cache_file_copied_onto_another_key_is_not_read_back(sts_pairs, isolated_cache) -> None:
    method = embedlab.load("minilm")
    first, second = scoring.encode_texts(method, sts_pairs[:4]), scoring.encode_texts(method, sts_pairs[4:8])
    paths = sorted(_vector_entries(isolated_cache), key=lambda path: path.stat().st_mtime_ns)
    assert len(paths) == 2
    paths[1].write_bytes(paths[0].read_bytes())  # a valid file, but of another key
    with recompute_warns(paths[1]):
        again = scoring.encode_texts(method, sts_pairs[4:8])
    np.testing.assert_allclose(again, second, atol=UNIT_ATOL)  # recomputed: float32 rounding
    assert not np.allclose(first, second)


@pytest.mark.parametrize("fault", ["flip-last", "truncate-half"])
@pytest.mark.crosspath
def test_a_damaged_neural_slice_is_recomputed(fault, isolated_cache) -> None:
    from embedlab.neural.family import NeuralEmbedder

    sentences = ["A man is playing a guitar on the stage.", "Two dogs run through the snow."]
    embedder = NeuralEmbedder("minilm", {"epochs": "2"})
    clean = embedder.embed(sentences)
    path = ArrayStore("neural").path(embedder.cache_key(sentences[1]))
    ARRAY_FAULTS[fault](path)
    with recompute_warns(path):
        again = NeuralEmbedder("minilm", {"epochs": "2"}).embed(sentences)
    np.testing.assert_allclose(again, clean, atol=UNIT_ATOL, rtol=0)  # unit vectors; the damaged text tuned again alone: float32 rounding


@pytest.mark.parametrize("kind", ["static", "reference", "reference_vectors", "alignsim-margins", "mlm_head"])
@pytest.mark.parametrize("fault", ["flip-middle", "truncate-half"])
def test_every_other_array_store_verifies_on_read(kind, fault, minilm, sts_pairs, isolated_cache) -> None:
    """The stores whose producers need minutes and hundreds of MB (Avg static tables run the model over the
    whole vocabulary, idf^W and token counts tokenise all of WikiText-2 train, reference vectors pool 10,000
    sentences; margins, MLM-head features) share ArrayStore: here with real token states of the real model,
    damaged on disk."""
    [states] = TokenStateStore(minilm, use_disk_cache=False).compute(sts_pairs[:1])
    clean = states.layer(minilm.num_layers).copy()
    store = ArrayStore(kind)
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        return clean.copy()

    store.get("entry", compute)
    ARRAY_FAULTS[fault](store.path("entry"))
    with recompute_warns(store.path("entry")):
        again = store.get("entry", compute)
    assert len(calls) == 2
    np.testing.assert_array_equal(again, clean)


# --- item 2 and 7: token-state packs and their index ----------------------------------------------------

@pytest.fixture
def packed(minilm, sts_pairs, isolated_cache):
    """Four texts' clean last-layer token states, written into one pack; returns (texts, clean states, pack store, keys)."""
    texts = sts_pairs[:4]
    store = TokenStateStore(minilm)
    clean = store.compute(texts, layers=(minilm.num_layers,))
    keys = [store.key(text, None, minilm.num_layers) for text in texts]
    return texts, clean, store._packs(), keys


def recomputed_states(minilm, texts):
    clear()
    return TokenStateStore(minilm).compute(texts, layers=(minilm.num_layers,))


def assert_states_close(found, clean) -> None:
    for a, b in zip(found, clean):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.states, b.states, atol=1e-5)  # recomputed alone vs in a batch of four


def swap_offsets(packs: PackStore, keys: list[str]) -> None:
    with sqlite3.connect(packs.index_path) as connection:
        (offset0, length0), (offset1, length1) = [
            connection.execute("SELECT offset, length FROM entries WHERE key = ?", (key,)).fetchone() for key in keys[:2]
        ]
        connection.execute("UPDATE entries SET offset = ?, length = ? WHERE key = ?", (offset1, length1, keys[0]))
        connection.execute("UPDATE entries SET offset = ?, length = ? WHERE key = ?", (offset0, length0, keys[1]))
    connection.close()


def point_at_other(packs: PackStore, keys: list[str]) -> None:
    """Both rows point at the second (intact) entry."""
    with sqlite3.connect(packs.index_path) as connection:
        offset, length = connection.execute("SELECT offset, length FROM entries WHERE key = ?", (keys[1],)).fetchone()
        connection.execute("UPDATE entries SET offset = ?, length = ? WHERE key = ?", (offset, length, keys[0]))
    connection.close()


def damage_first_entry(packs: PackStore, keys: list[str], how: str) -> None:
    pack, offset, length = packs.locations(keys[:1])[keys[0]]
    path = packs.folder / pack
    payload = bytearray(path.read_bytes())
    if how == "data":
        payload[offset + length - 100] ^= 0xFF
    elif how == "header":
        payload[offset + 8 : offset + 24] = b"\x00" * 16
    path.write_bytes(bytes(payload))


@pytest.mark.parametrize("fault", ["swap-two-rows", "row-points-at-another-entry"])
def test_an_index_row_pointing_at_another_valid_entry_is_caught(fault, packed, minilm, caplog) -> None:
    texts, clean, packs, keys = packed
    (swap_offsets if fault == "swap-two-rows" else point_at_other)(packs, keys)
    with caplog.at_level(logging.WARNING, logger="embedlab.tokens.packs"):
        again = recomputed_states(minilm, texts)
    assert "another key" in caplog.text and str(packs.folder) in caplog.text
    assert_states_close(again, clean)


@pytest.mark.parametrize("how", ["data", "header"])
def test_a_damaged_pack_entry_is_recomputed(how, packed, minilm, caplog) -> None:
    texts, clean, packs, keys = packed
    damage_first_entry(packs, keys, how)
    with caplog.at_level(logging.WARNING, logger="embedlab.tokens.packs"):
        again = recomputed_states(minilm, texts)
    assert keys[0][:16] in caplog.text and ".pack" in caplog.text
    assert_states_close(again, clean)


def test_a_truncated_pack_is_recomputed(packed, minilm, caplog) -> None:
    texts, clean, packs, keys = packed
    [pack] = packs.folder.glob("*.pack")
    truncate_half(pack)
    with caplog.at_level(logging.WARNING, logger="embedlab.tokens.packs"):
        again = recomputed_states(minilm, texts)
    assert "truncated" in caplog.text and pack.name in caplog.text
    assert_states_close(again, clean)


@pytest.mark.parametrize("fault", ["garbage", "truncated", "zeroed-header"])
def test_a_damaged_index_is_moved_aside_and_rebuilt(fault, packed, minilm) -> None:
    texts, clean, packs, keys = packed
    index = packs.index_path
    if fault == "garbage":
        index.write_bytes(b"not an SQLite index " * 500)
    elif fault == "truncated":
        index.write_bytes(index.read_bytes()[:100])
    else:
        index.write_bytes(b"\x00" * 100 + index.read_bytes()[100:])
    damaged = index.read_bytes()
    with pytest.warns(RuntimeWarning, match=f"damaged token-state index {index}.*moved aside"):
        again = recomputed_states(minilm, texts)
    assert_states_close(again, clean)
    [aside] = packs.folder.glob("index.sqlite.damaged-*")
    assert aside.read_bytes() == damaged  # kept for the user to look at
    assert set(packs.locations(keys)) == set(keys)  # the new index holds the recomputed entries
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a later run reads the rebuilt index quietly
        assert_states_close(recomputed_states(minilm, texts), again)


# --- item 9: unwritable cache folders -------------------------------------------------------------------

@pytest.fixture
def tiny_filesystem(tmp_path):
    """A 256 KiB tmpfs (root only: a real filesystem that fills up, or is read-only, whatever the user)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tiny tmpfs here (needs root)")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def make_read_only(folder: Path, request) -> None:
    """chmod for a normal user; root ignores modes, so a tmpfs remounted read-only (skip without one)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        request.addfinalizer(lambda: folder.chmod(0o755))
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root and cannot mount a read-only tmpfs")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(folder)], capture_output=True))
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    assert not os.access(folder, os.W_OK)


def fill_up(folder: Path) -> None:
    """Write a filler file until the filesystem says ENOSPC."""
    descriptor = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)


def encode_and_states(minilm, texts):
    vectors = scoring.encode_texts(embedlab.load("minilm"), texts)
    states = TokenStateStore(minilm).compute(texts)
    return vectors, states


@pytest.fixture
def clean_values(minilm, sts_pairs, tmp_path_factory, monkeypatch):
    """Vectors and token states computed with a working cache, for comparison."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path_factory.mktemp("clean-cache")))
    clear()
    values = encode_and_states(minilm, sts_pairs[:3])
    clear()
    return values


def assert_warned_once_per_folder(record, fragment: str) -> None:
    unwritable = [str(warning.message) for warning in record if "not writable" in str(warning.message)]
    assert unwritable, [str(warning.message) for warning in record]
    assert len(unwritable) == len(set(unwritable))  # once per folder, not once per file
    assert all(fragment in message for message in unwritable)


@pytest.mark.parametrize("fault", ["read-only", "full-tmpfs", "enospc-on-write"])
@pytest.mark.crosspath
def test_an_unwritable_cache_warns_once_and_computes_without_caching(fault, minilm, sts_pairs, clean_values,
                                                                     tmp_path, monkeypatch, request) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    if fault == "read-only":
        make_read_only(cache, request)
    elif fault == "full-tmpfs":
        cache = request.getfixturevalue("tiny_filesystem")
        fill_up(cache)
    else:  # no root: a full disk simulated at the system call every cache write goes through
        def full(descriptor, buffers):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "writev", full)
    monkeypatch.setenv("EMBEDLAB_CACHE", str(cache))
    clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        vectors, states = encode_and_states(minilm, sts_pairs[:3])
        vectors_again, _ = encode_and_states(minilm, sts_pairs[:3])  # a second round warns no more
    assert_warned_once_per_folder(record, str(cache))
    clean_vectors, clean_states = clean_values
    # token states recomputed in other batches than the clean run's: float32 rounding
    np.testing.assert_allclose(vectors, clean_vectors, atol=UNIT_ATOL)
    np.testing.assert_allclose(vectors_again, clean_vectors, atol=UNIT_ATOL)
    assert_states_close(states, clean_states)
    assert not list(cache.rglob("*.tmp")) and not list(cache.rglob("*.safetensors")) and not list(cache.rglob("*.pack"))


# --- item 9: kill -9 mid-write, orphan temporaries --------------------------------------------------------

WRITER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from embedlab.runtime.cache import atomic
    from embedlab.runtime.cache.arrays import ArrayStore
    original = atomic._write_all

    def half_then_hang(descriptor, buffers):
        views = [memoryview(buffer).cast("B") for buffer in buffers]
        os.write(descriptor, bytes(views[0])[: max(1, len(views[0]) // 2)])
        print("writing", flush=True)
        time.sleep(600)

    atomic._write_all = half_then_hang
    if sys.argv[1] == "array":
        ArrayStore("eval").save("entry", np.arange(100000, dtype=np.float32))
    else:
        from embedlab.models.loading import load_model
        from embedlab.tokens.store import TokenStateStore
        TokenStateStore(load_model("minilm")).compute(["A man is playing a guitar."])
""")


def kill_mid_write(what: str, cache: Path) -> None:
    """Start a writer that stops halfway through its file, and ``kill -9`` it there."""
    environment = {**os.environ, "EMBEDLAB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    child = preloaded.Popen([sys.executable, "-c", WRITER, what], stdout=subprocess.PIPE, env=environment, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        assert list(cache.rglob(".*.tmp"))  # the half-written temporary file is there
    finally:
        child.kill()  # SIGKILL: no cleanup handler runs
        child.wait()
    assert child.returncode == -9


def test_an_array_writer_killed_mid_write_leaves_nothing_readable(isolated_cache) -> None:
    kill_mid_write("array", isolated_cache)
    clear()  # a new process would sweep the folder on first use
    store = ArrayStore("eval")
    assert store.load("entry") is None and not store.path("entry").exists()
    assert not list(isolated_cache.rglob("*.tmp"))  # the orphan was removed
    np.testing.assert_array_equal(store.get("entry", lambda: np.arange(100000, dtype=np.float32)),
                                  np.arange(100000, dtype=np.float32))


def test_a_pack_writer_killed_mid_write_leaves_no_entry_and_no_orphan(minilm, isolated_cache) -> None:
    text = "A man is playing a guitar."
    clean = TokenStateStore(minilm, use_disk_cache=False).compute([text])
    kill_mid_write("pack", isolated_cache)
    clear()
    store = TokenStateStore(minilm)
    assert store._packs().locations([store.key(text, None, minilm.num_layers)]) == {}  # the index never learnt of the pack
    assert not list(isolated_cache.rglob("*.tmp"))
    assert_states_close(store.compute([text]), clean)


@pytest.mark.parametrize("case, removed", [("dead-pid", True), ("live-pid-hour-old", True),
                                           ("live-pid-fresh", False), ("not-ours", False)])
def test_orphan_temporaries_are_removed_only_when_abandoned(case, removed, isolated_cache) -> None:
    folder = cache_dir("eval")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout) if case == "dead-pid" else os.getpid()
    name = "notes.tmp" if case == "not-ours" else f".{uuid.uuid4().hex}.safetensors.{pid}.1.0.tmp"
    temporary = folder / name
    temporary.write_bytes(b"half")
    if case == "live-pid-hour-old":
        old = time.time() - 2 * 3600
        os.utime(temporary, (old, old))
    clear()
    ArrayStore("eval").load("anything")
    assert temporary.exists() is not removed


# --- passing today: resume after kill -9, concurrent writers ----------------------------------------------

CONCURRENT = textwrap.dedent("""
    import sys
    import numpy as np
    from embedlab.models.loading import load_model
    from embedlab.runtime.cache.arrays import ArrayStore
    from embedlab.tokens.store import TokenStateStore
    texts = sys.argv[1:]
    states = TokenStateStore(load_model("minilm")).compute(texts)
    for key in range(20):
        ArrayStore("eval").save(f"shared-{key}", np.full(1000, key, dtype=np.float32))
    print("done", sum(state.num_tokens for state in states))
    import gc; gc.freeze()  # exit without a last collection over torch and the model (as the embedlab program does)
""")


@pytest.mark.slow
def test_concurrent_writers_share_one_cache(minilm, sts_pairs, isolated_cache) -> None:
    environment = {**os.environ, "EMBEDLAB_CACHE": str(isolated_cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    children = [preloaded.Popen([sys.executable, "-c", CONCURRENT, *sts_pairs[start : start + 4]], env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for start in (0, 2)]
    outputs = [child.communicate(timeout=300) for child in children]
    assert all(child.returncode == 0 for child in children), outputs
    clear()
    for key in range(20):
        np.testing.assert_array_equal(ArrayStore("eval").load(f"shared-{key}"), np.full(1000, key, dtype=np.float32))
    store = TokenStateStore(minilm)
    keys = [store.key(text, None, layer) for text in sts_pairs[:6] for layer in store.all_layers]
    assert set(store._packs().locations(keys)) == set(keys)
    clean = TokenStateStore(minilm, use_disk_cache=False).compute(sts_pairs[:6])
    assert_states_close(store.compute(sts_pairs[:6]), clean)
    assert not list(isolated_cache.rglob("*.tmp"))


def test_token_states_resume_after_a_kill(minilm, sts_pairs, isolated_cache) -> None:
    """A run killed while writing a second pack keeps the first: only the unfinished texts are recomputed."""
    first = TokenStateStore(minilm).compute(sts_pairs[:2])
    kill_mid_write("pack", isolated_cache)
    clear()
    store = TokenStateStore(minilm)
    keys = [store.key(text, None, layer) for text in sts_pairs[:2] for layer in store.all_layers]
    assert set(store._packs().locations(keys)) == set(keys)
    for a, b in zip(store.compute(sts_pairs[:2]), first):
        np.testing.assert_array_equal(a.states, b.states)  # read back, bit for bit


# --- item 4: a fitted method's identity reaches the eval cache ---------------------------------------------

@pytest.mark.crosspath
def test_the_eval_cache_tells_fitted_methods_apart(sts_pairs, isolated_cache) -> None:
    spec = "minilm:weights=idf-target,post=zscore"
    unfitted = scoring.encode_texts(embedlab.load(spec), sts_pairs[:10])  # 10: the fewest a target fit takes
    fitted_a = scoring.encode_texts(embedlab.load(spec).fit(sts_pairs[:6]), sts_pairs[:4])
    fitted_b = scoring.encode_texts(embedlab.load(spec).fit(sts_pairs[6:]), sts_pairs[:4])
    assert len(_vector_entries(isolated_cache)) == 3
    assert not np.allclose(fitted_a, fitted_b, atol=1e-4)
    clear()
    # bit-identical by construction: the same fitted method's vectors read back from the eval cache fitted_b wrote
    np.testing.assert_array_equal(scoring.encode_texts(embedlab.load(spec).fit(sts_pairs[6:]), sts_pairs[:4]), fitted_b)
    assert unfitted.shape == (10, fitted_a.shape[1])


# --- item 7: a damaged results database --------------------------------------------------------------------

def cli(*arguments, cache: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "EMBEDLAB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "EMBEDLAB_DEBUG": "", "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    return preloaded.run([sys.executable, "-m", "embedlab", *map(str, arguments)], capture_output=True, text=True,
                         env=environment, cwd=REPO_ROOT, timeout=300)


def damaged_database(folder: Path, fault: str) -> Path:
    from embedlab.evaluation.records import Record

    path = folder / "results.sqlite"
    ResultsDB(path).add([Record("minilm", "sts", "stsb", "test", "spearman", 0.8203, 1379)], fingerprint="f")
    if fault == "garbage":
        path.write_bytes(b"garbage, not SQLite " * 300)
    elif fault == "truncated":
        truncate_half(path)
    else:
        payload = bytearray(path.read_bytes())
        payload[100:] = b"\xff" * (len(payload) - 100)  # the header survives, the pages do not
        path.write_bytes(bytes(payload))
    return path


@pytest.mark.parametrize("fault", ["garbage", "truncated", "pages-overwritten"])
def test_a_damaged_results_database_is_one_cli_line_naming_it(fault, tmp_path) -> None:
    path = damaged_database(tmp_path, fault)
    before = path.read_bytes()
    finished = cli("results", "--db", path, cache=tmp_path / "cache")
    assert finished.returncode == 1, finished.stderr
    assert "Traceback" not in finished.stderr
    [line] = [line for line in finished.stderr.splitlines() if ": error: " in line]
    assert line.startswith("embedlab results: error: results database: ") and str(path) in line
    assert path.read_bytes() == before  # left as it was, for the user to look at


def test_a_damaged_results_database_error_names_the_file_in_the_api(tmp_path) -> None:
    path = damaged_database(tmp_path, "garbage")
    with pytest.raises(sqlite3.DatabaseError, match=str(path)):
        ResultsDB(path).records()
