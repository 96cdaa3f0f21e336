"""Build locks: processes that share a cache (test workers, parallel runs) compute a missing entry once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

BUILD_WAIT_SECONDS = 1800.0  # past this a waiting process stops waiting and builds its own copy


@contextlib.contextmanager
def building(path: Path, wait: float | None = None) -> Iterator[bool]:
    """Hold the build lock of the cache entry ``path`` while computing it, so that two processes that
    need the same missing entry (two test workers, two CLI runs) compute it once: the second waits, then
    finds the entry the first wrote. Use it as ``with building(path): load, else compute and write``.

    The lock is an ``flock`` on ``.<name>.lock`` beside the entry (filelock), so the kernel releases it
    when its holder dies, even by SIGKILL; the waiter then takes it and builds the entry itself. Entries
    are still written by :func:`~embedlab.runtime.cache.atomic.atomic_write_bytes`, so a reader never sees
    half a file whether or not it took the lock. Yields whether the lock is held: where it cannot be made
    (a read-only folder) or after ``wait`` seconds (default :data:`BUILD_WAIT_SECONDS`), the caller builds
    its own copy unlocked.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(path.with_name(f".{path.name}.lock")), timeout=BUILD_WAIT_SECONDS if wait is None else wait)
    try:
        lock.acquire()
    except (Timeout, OSError):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
