import os
import platform
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.settings import data_path


def test_atomic_write_replaces_whole_files_with_ordinary_permissions(tmp_path):
    target = tmp_path / "sub" / "entry.bin"
    atomic_write_bytes(target, b"first")
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    assert list(target.parent.iterdir()) == [target]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_atomic_write_of_many_buffers_writes_them_in_order(tmp_path):
    import numpy as np

    array = np.arange(100_000, dtype=np.float32)
    buffers = [b"head", memoryview(array).cast("B"), b"", bytearray(b"tail")] * 300  # > IOV_MAX buffers
    target = tmp_path / "many.bin"
    atomic_write_bytes(target, buffers)
    assert target.read_bytes() == b"".join(bytes(buffer) for buffer in buffers)


def test_missing_data_names_the_path_and_root(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=f"data root searched: {tmp_path}"):
        data_path("sts", "nothing.txt")


def test_a_memo_computes_once_and_drops_the_least_recently_used():
    from embedlab.runtime.memo import memo

    store = memo("test: lru", maxsize=2)
    store.clear()
    calls = []
    compute = lambda key: (lambda: calls.append(key) or key * 10)  # noqa: E731
    assert store.get(1, compute(1)) == 10 and store.get(2, compute(2)) == 20 and store.get(1, compute(1)) == 10
    store.get(3, compute(3))  # 2 was used least recently
    assert 1 in store and 2 not in store and 3 in store and calls == [1, 2, 3]
    assert memo("test: lru") is store  # one memo per name in the process


def test_cached_functions_are_forgotten_by_clear():
    from embedlab.runtime.memo import cached, clear

    calls = []

    @cached("test: squares")
    def square(value: int) -> int:
        calls.append(value)
        return value * value

    assert square(3) == 9 and square(3) == 9 and calls == [3]
    clear()
    assert square(3) == 9 and calls == [3, 3]


def test_configure_moves_the_cache_and_clears_memos(tmp_path, monkeypatch):
    from embedlab.runtime.memo import memo
    from embedlab.runtime.settings import cache_root, configure

    monkeypatch.delenv("EMBEDLAB_CACHE", raising=False)
    store = memo("test: configure")
    store.put("key", "value")
    try:
        configure(cache_root=tmp_path / "elsewhere")
        assert cache_root() == tmp_path / "elsewhere" and len(store) == 0
    finally:
        configure()
    assert cache_root() != tmp_path / "elsewhere"


def test_array_store_round_trips_and_refuses_damaged_or_renamed_files(tmp_path, monkeypatch):
    import numpy as np

    from embedlab.runtime.cache.arrays import ArrayStore

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    store = ArrayStore("test-arrays")
    array = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert store.get("a", lambda: array) is array and store.load("missing") is None
    np.testing.assert_array_equal(store.load("a"), array)
    store.path("a").rename(store.path("b"))  # another key's file: its recorded key does not match
    with pytest.warns(RuntimeWarning, match="checksum or key mismatch"):
        assert store.load("b") is None
    store.save("c", array)
    payload = bytearray(store.path("c").read_bytes())
    payload[-1] ^= 0xFF
    store.path("c").write_bytes(bytes(payload))
    with pytest.warns(RuntimeWarning, match="damaged cache file"):
        np.testing.assert_array_equal(store.get("c", lambda: array + 1), array + 1)  # recomputed and rewritten
    np.testing.assert_array_equal(store.load("c"), array + 1)


def test_progress_bars_only_for_a_watched_terminal(monkeypatch):
    import io
    import sys

    from embedlab.runtime.progress import set_progress, show_progress, status

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    try:
        monkeypatch.setattr(sys, "stderr", io.StringIO())  # piped or logged
        assert show_progress() is False and show_progress(True) is True
        set_progress("always")
        assert show_progress() is True and show_progress(False) is False
        monkeypatch.setattr(sys, "stderr", Terminal())
        set_progress("auto")
        assert show_progress() is True
        set_progress("quiet")  # --quiet wins over everything, an explicit request included
        assert show_progress() is False and show_progress(True) is False
        status("hidden")
        assert sys.stderr.getvalue() == ""
        with pytest.raises(ValueError, match="unknown progress mode"):
            set_progress("loud")
    finally:
        set_progress("auto")


# --- the cache budget ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("1048576", 1 << 20), ("500M", 500 << 20), ("2G", 2 << 30), ("2GiB", 2 << 30),
                                            ("1.5g", 3 << 29), ("64k", 64 << 10), ("0", 0), (" 3T ", 3 << 40), ("10b", 10)])
def test_sizes_are_read_in_binary_units(text, expected):
    from embedlab.runtime.settings import parse_size

    assert parse_size(text, "X") == expected


@pytest.mark.parametrize("text", ["lots", "-5M", "2 GB please", "", "nan", "inf", "5Q"])
def test_a_bad_cache_budget_is_an_error_naming_the_variable(text, monkeypatch):
    from embedlab.runtime.settings import cache_budget, cache_root

    monkeypatch.setenv("EMBEDLAB_CACHE_MAX", text)
    if not text:
        assert cache_budget() == 2 << 30  # unset or empty: the default
        return
    with pytest.raises(ValueError, match=f"EMBEDLAB_CACHE_MAX={text!r} is not a size"):
        cache_root()  # checked where the cache is first named, before any work


def test_a_store_of_results_is_kept_under_any_budget_and_a_stale_marker_is_dropped(tmp_path, monkeypatch):
    import numpy as np

    from embedlab.runtime.cache.arrays import ArrayStore
    from embedlab.runtime.cache.budget import cache_kinds, clear_cache, evict_to_budget
    from embedlab.runtime.settings import configure

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / ".recomputable").touch()  # what an earlier version marked as cache
    configure(cache_max=1)
    try:
        results, cache = ArrayStore("results", recomputable=False), ArrayStore("eval")
        results.save("margins", np.arange(1000, dtype=np.float32))
        cache.save("encoding", np.arange(1000, dtype=np.float32))  # over the 1-byte budget: evicted at once
        evict_to_budget(0)
        assert not cache.path("encoding").exists() and cache.load("encoding") is None
        np.testing.assert_array_equal(results.load("margins"), np.arange(1000, dtype=np.float32))
        kinds = {kind.name: kind for kind in cache_kinds()}
        assert not kinds["results"].recomputable and kinds["eval"].recomputable
        clear_cache()  # deletes every recomputable folder's entries, not results
        assert results.path("margins").exists()
    finally:
        configure()


def test_array_store_entries_are_evicted_least_recently_used_and_recomputed(tmp_path, monkeypatch):
    import numpy as np

    from embedlab.runtime.cache.arrays import ArrayStore
    from embedlab.runtime.cache.budget import cache_kinds, cache_size, clear_cache
    from embedlab.runtime.settings import configure

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    keep = tmp_path / "token_weights" / "learned.safetensors"  # not an ArrayStore folder: never evicted
    keep.parent.mkdir()
    keep.write_bytes(b"\0" * 1000)
    arrays = {key: np.full(10_000, index, dtype=np.float32) for index, key in enumerate("abcd")}  # 40 KB each
    # the kept file and three entries fit under the 90 % an eviction goes down to; a fourth passes the budget
    budget = 1000 + 7 * 40_500 // 2
    configure(cache_max=budget)
    try:
        store = ArrayStore("eval")
        for key in "abc":
            store.save(key, arrays[key])
        assert store.load("a") is not None  # a is now used more recently than b
        store.save("d", arrays["d"])
        assert cache_size() <= budget
        assert not store.path("b").exists() and all(store.path(key).exists() for key in "acd") and keep.exists()
        calls = []
        again = store.get("b", lambda: calls.append("b") or arrays["b"])  # evicted: recomputed, written again
        np.testing.assert_array_equal(again, arrays["b"])
        assert calls == ["b"] and cache_size() <= budget and keep.exists()
        kinds = {kind.name: kind for kind in cache_kinds()}
        assert kinds["eval"].recomputable and kinds["eval"].entries == 3 and not kinds["token_weights"].recomputable
        assert clear_cache("eval") > 100_000 and not list((tmp_path / "eval").glob("*.safetensors")) and keep.exists()
        store.save("e", arrays["a"])  # the folder is still marked recomputable after clearing
        assert {kind.name: kind for kind in cache_kinds()}["eval"].entries == 1
    finally:
        configure()


def test_a_run_writing_past_the_budget_walks_the_cache_once_per_tenth_of_it(tmp_path, monkeypatch):
    """Eviction after a write goes down to 90 % of the budget: 200 entries of 4 KB into a budget of 40 entries walk
    the cache once per 5 entries past it (evicted to 36, past 40 again at the fifth), not once per write as when
    evicting exactly to the budget (about 160 walks), and the cache stays under the budget with the newest entries."""
    import numpy as np

    from embedlab.runtime.cache import budget as cache_budget_module
    from embedlab.runtime.cache.arrays import ArrayStore
    from embedlab.runtime.settings import configure

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    walks = []
    scan = cache_budget_module._scan
    monkeypatch.setattr(cache_budget_module, "_scan", lambda root: walks.append(1) or scan(root))
    store = ArrayStore("eval")
    store.save("size", np.zeros(1000, dtype=np.float32))
    entry = store.path("size").stat().st_size
    configure(cache_max=40 * entry)
    try:
        walks.clear()
        for index in range(200):
            store.save(f"entry{index}", np.full(1000, index, dtype=np.float32))
        assert 30 <= len(walks) <= 40  # about 160 / 5
        assert cache_budget_module.cache_size() <= 40 * entry
        assert store.load("entry199") is not None and store.load("entry0") is None
    finally:
        configure()


def test_token_states_uncached_is_scoped_and_restores_the_setting():
    from embedlab.runtime.settings import stores_token_states, token_states_uncached

    assert stores_token_states()
    with token_states_uncached():
        assert not stores_token_states()
        with token_states_uncached():
            assert not stores_token_states()
        assert not stores_token_states()
    assert stores_token_states()


_MMAPPED_AFTER_A_FREED_LARGE_BLOCK = """
import ctypes, sys
import numpy as np
from embedlab.runtime.memory import keep_large_allocations_apart
if sys.argv[1] == "apart":
    keep_large_allocations_apart()
libc = ctypes.CDLL(None)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc.mallinfo2.restype = Info
block = np.ones(16 << 20, dtype=np.uint8)
del block  # a freed mapping of 16 MiB: glibc's default threshold rises to it
before = libc.mallinfo2().hblkhd
kept = np.ones(8 << 20, dtype=np.uint8)
print(libc.mallinfo2().hblkhd - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or "glibc" not in " ".join(platform.libc_ver()), reason="glibc's malloc")
def test_large_allocations_get_their_own_mapping_after_keep_large_allocations_apart():
    """Without the call, an 8 MiB array after a freed 16 MiB one comes from the heap (glibc raised its threshold);
    with it, the array is mapped on its own, so freeing it returns the memory at once."""
    def mapped_bytes(mode: str) -> int:
        finished = subprocess.run([sys.executable, "-c", _MMAPPED_AFTER_A_FREED_LARGE_BLOCK, mode], capture_output=True, text=True,
                                  check=True, cwd=Path(__file__).resolve().parent.parent)
        return int(finished.stdout.strip())

    assert mapped_bytes("default") == 0
    assert mapped_bytes("apart") >= 8 << 20


_ARENAS_AFTER_THREADS = """
import ctypes, os, sys, tempfile, threading
from embedlab.runtime.memory import limit_malloc_arenas
if sys.argv[1] != "default":
    limit_malloc_arenas(int(sys.argv[1]))
libc = ctypes.CDLL(None)
start, done = threading.Barrier(8), threading.Barrier(8)
def allocate():
    start.wait()  # all at once, so that each finds the others' arenas locked
    blocks = [ctypes.create_string_buffer(1000) for _ in range(2000)]
    done.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads: thread.start()
for thread in threads: thread.join()
libc.fopen.restype = ctypes.c_void_p
path = tempfile.mktemp()
stream = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(open(path).read().count("<heap nr="))
os.remove(path)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or "glibc" not in " ".join(platform.libc_ver()), reason="glibc's malloc")
def test_limit_malloc_arenas_caps_the_heaps_that_threads_create():
    """glibc's malloc_info lists one heap per arena: eight threads allocating at once make several without the
    call, and at most the limit with it."""
    def heaps(limit: str) -> int:
        finished = subprocess.run([sys.executable, "-c", _ARENAS_AFTER_THREADS, limit], capture_output=True, text=True,
                                  check=True, cwd=Path(__file__).resolve().parent.parent)
        return int(finished.stdout.strip())

    assert heaps("default") > 2
    assert heaps("2") <= 2
    assert heaps("1") == 1


def test_heap_trimmer_trims_first_then_only_after_the_slack_is_grown():
    """Hand-made resident sizes (MiB): the first call trims; then a trim only once resident memory is ``slack``
    above its level right after the last trim; with no level readable, every call trims."""
    from embedlab.runtime.memory import HeapTrimmer

    readings = iter([500, 420, 600, 669, 670, 450, 699, 719])  # before/after each trim and each check
    trims: list[int] = []
    trimmer = HeapTrimmer(250, resident=lambda: next(readings), trim=lambda: trims.append(1))
    assert [trimmer() for _ in range(5)] == [True, False, False, True, False]
    # levels: 420 after the first trim; 600 and 669 are under 420 + 250; 670 trims (level 450); 699 is under 450 + 250
    assert len(trims) == 2 and next(readings) == 719
    blind = HeapTrimmer(250, resident=lambda: None, trim=lambda: trims.append(1))
    assert [blind(), blind()] == [True, True] and len(trims) == 4


def test_token_states_uncached_holds_for_its_own_thread_only():
    """The switch is scoped to the block's thread: another thread's model runs keep storing token states."""
    import threading

    from embedlab.runtime.settings import stores_token_states, token_states_uncached

    inside, outside = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def uncached_block() -> None:
        with token_states_uncached():
            seen["uncached thread, in its block"] = stores_token_states()
            inside.set()
            outside.wait(10)
        seen["uncached thread, after its block"] = stores_token_states()

    def other() -> None:
        inside.wait(10)
        seen["other thread, meanwhile"] = stores_token_states()
        outside.set()

    threads = [threading.Thread(target=uncached_block), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen == {"uncached thread, in its block": False, "other thread, meanwhile": True,
                    "uncached thread, after its block": True}
    assert stores_token_states()


def test_set_token_state_storing_is_the_process_default_that_blocks_override():
    from embedlab.runtime.settings import set_token_state_storing, stores_token_states, token_states_uncached

    try:
        set_token_state_storing(False)
        assert not stores_token_states()
        with token_states_uncached():
            assert not stores_token_states()
        assert not stores_token_states()
    finally:
        set_token_state_storing(True)
    assert stores_token_states()


def test_settings_read_from_the_environment(monkeypatch, tmp_path):
    from embedlab.runtime.settings import debug_requested, ray_address, results_path, solver_thread_count

    monkeypatch.delenv("EMBEDLAB_RESULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert results_path("results.sqlite") == tmp_path / "results.sqlite"
    monkeypatch.setenv("EMBEDLAB_RESULTS", "~/elsewhere.sqlite")
    assert results_path("results.sqlite") == Path("~/elsewhere.sqlite").expanduser()
    for value, expected in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("EMBEDLAB_DEBUG", value)
        assert debug_requested() is expected
    monkeypatch.setenv("RAY_ADDRESS", "")
    assert ray_address() is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert ray_address() == "10.0.0.1:6379"
    monkeypatch.delenv("EMBEDLAB_SOLVER_THREADS", raising=False)
    assert solver_thread_count() == 1
    monkeypatch.setenv("EMBEDLAB_SOLVER_THREADS", "3")
    assert solver_thread_count() == 3
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv("EMBEDLAB_SOLVER_THREADS", bad)
        with pytest.raises(ValueError, match="EMBEDLAB_SOLVER_THREADS"):
            solver_thread_count()
