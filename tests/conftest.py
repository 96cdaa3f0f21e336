"""Shared fixtures: offline hub, the real default model, and small slices of the real data; the cores shared
between xdist workers; an opt-in per-test CPU-time log (docs/testing.md)."""

from __future__ import annotations

import json
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# No bootstrap intervals unless a test asks for them (evaluate(bootstrap=B), --bootstrap B): B = 1,000 resamples
# of every record would cost the suite seconds in tests about other things (docs/testing.md).
os.environ.setdefault("EMBEDLAB_BOOTSTRAP", "0")
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # Each xdist worker gets its share of the cores for torch and BLAS (set before torch is imported, and
    # inherited by the CLI subprocesses tests start): two workers each running two threads on two cores
    # spend their time preempting each other.
    _SHARE = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_variable, str(_SHARE))

import pytest

import preloaded  # tests/preloaded.py: its server's children are not ours, it reports their CPU (_cpu_seconds)

pytest_plugins = ["xdist_groups"]  # tests/xdist_groups.py: --dist loadgroup that holds under pytest 9.2

TEST_TIMES_VARIABLE = "EMBEDLAB_TEST_TIMES"


def pytest_configure(config):
    # the numeric comparisons of two code paths (docs/testing.md, "Comparing two code paths"): what
    # scripts/second_kernels.sh runs again under other CPU kernels
    config.addinivalue_line("markers", "crosspath: compares vectors or scores of two code paths (run under other CPU kernels "
                                       "by scripts/second_kernels.sh)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``EMBEDLAB_TEST_TIMES=FILE``, append one JSON line per test (setup, call and teardown together):
    wall seconds and CPU seconds of this process and its finished children. CPU time, unlike wall time,
    hardly moves with what else runs on a shared machine, so it ranks slow tests honestly under load."""
    path = os.environ.get(TEST_TIMES_VARIABLE)
    if not path:
        yield
        return
    started = time.time()
    before = _cpu_seconds(), time.perf_counter()
    yield
    cpu, wall = _cpu_seconds() - before[0], time.perf_counter() - before[1]
    line = json.dumps({"test": item.nodeid, "start": round(started, 3), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                       "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})
    with open(path, "a", encoding="utf-8") as stream:  # one short append per line: workers do not interleave
        stream.write(line + "\n")


def pytest_unconfigure(config):
    """The run is over: reap the preloading server (tests/preloaded.py), and spare each worker's interpreter a
    last garbage collection over every model and library the tests loaded (as the embedlab program does,
    ``embedlab.cli.app.run``)."""
    import gc

    preloaded.stop()
    gc.freeze()


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + preloaded.children_cpu_seconds


@pytest.fixture(scope="session")
def minilm():
    from embedlab.models.loading import load_model

    return load_model("minilm")


@pytest.fixture(scope="session")
def sts_test_rows() -> list[tuple[float, str, str]]:
    """(score, sentence 1, sentence 2) of the STS-B test split."""
    from embedlab.data.sts import stsb

    test = stsb("test")
    return list(zip(test.scores.tolist(), test.first, test.second))


@pytest.fixture(scope="session")
def sts_sentences(sts_test_rows) -> list[str]:
    """The first 60 unique sentences of STS-B test."""
    return list(dict.fromkeys(text for _, a, b in sts_test_rows[:40] for text in (a, b)))[:60]


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A private, empty cache root for tests that inspect or damage cache entries."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    from embedlab.runtime.memo import clear

    clear()  # no token states remembered in memory from another cache
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def wikitext_caches(minilm):
    """``seed(root)``: copy the suite cache's default-model reference statistics (idf^W, token counts: the
    shipped ones, copied into the cache on first use) into the fresh cache ``root``. They are an input, not the
    subject, of tests that start from an empty cache for another reason (streaming, token states)."""
    import shutil

    from embedlab.pooling.weights import reference_token_statistics
    from embedlab.runtime.settings import cache_dir

    reference_token_statistics(minilm.tokenizer)
    folders = [cache_dir("corpus"), cache_dir("reference")]

    def seed(root) -> None:
        for folder in folders:
            shutil.copytree(folder, root / folder.name, dirs_exist_ok=True)

    return seed

