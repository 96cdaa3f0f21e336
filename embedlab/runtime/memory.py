"""Malloc tuning: keep a long run's resident memory flat (glibc only; no-ops elsewhere)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable


def release_free_memory() -> None:
    """Hand memory that Python and torch have freed back to the operating system (glibc's ``malloc_trim``).

    glibc keeps freed heap pages for reuse, and the varying tensor shapes of a long run fragment its arenas,
    so a corpus run's resident memory crept up with the number of texts (0.88 → 1.02 GB over its first
    7,680 texts here) although nothing it held grew; trimming after each slice kept it flat (0.71 GB).
    A no-op where the C library has no ``malloc_trim`` (macOS, musl)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def resident_bytes() -> int | None:
    """The process's resident memory now (``/proc/self/statm``'s second field × the page size); None where
    there is no ``/proc``."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return None


class HeapTrimmer:
    """:func:`release_free_memory` only once resident memory has grown ``slack`` bytes above its level after the
    previous trim (the first call trims; where the level cannot be read, every call does).

    A trim is not free: glibc gives back the pages of every free chunk, and the next work faults them in again.
    After every 20-sentence group of the candidate-set bf16 neural path, the trim itself took 8–11 ms of a 0.55 s
    group, and the faults after it more; a long run needs a trim only when its heap has grown."""

    def __init__(self, slack: int, resident: Callable[[], int | None] = resident_bytes, trim: Callable[[], None] = release_free_memory) -> None:
        self.slack = slack
        self._resident = resident
        self._trim = trim
        self._level: int | None = None

    def __call__(self) -> bool:
        """Trim if the heap has grown enough; whether it trimmed."""
        now = self._resident()
        if now is not None and self._level is not None and now - self._level < self.slack:
            return False
        self._trim()
        self._level = self._resident()
        return True


def keep_large_allocations_apart(threshold: int = 4 << 20) -> None:
    """Serve every allocation of ``threshold`` bytes or more (a batch's activations and token states) with its
    own ``mmap``, returned to the system when freed, for the rest of this process (glibc's ``M_MMAP_THRESHOLD``).

    glibc's default threshold rises with the sizes it has seen freed (up to 32 MiB), after which tensors of
    a few MiB come from the heap and fragment it: a 100,000-text corpus run climbed from 0.86 to 1.03 GB
    peak over its first three minutes, and with this call the same run held 0.81 GB. Why 4 MiB: every fresh
    mapping costs page faults, and at 1 MiB (the small batches of short texts mapped too) a 5,000-text run took
    24 % longer than with glibc's default; at 4 MiB it takes 9 % longer and peaks 0.13 GB lower (interleaved
    runs, ``benchmarks/bench_allocator.py``). A no-op off glibc."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(_M_MMAP_THRESHOLD, threshold)


def limit_malloc_arenas(count: int) -> None:
    """At most ``count`` glibc malloc arenas for the rest of this process (``M_ARENA_MAX``; default 8 per core).

    Every thread that allocates while another holds its arena's lock gets an arena of its own, and freed
    memory stays in the arena that served it: a server's threads (event loop, batch thread, one stream per
    core, tokenizer workers) each kept a heap of the batches they had held. Under 64 clients the served
    process peaked at 1,046 MiB with glibc's default and 746 MiB with 2 arenas, at the same texts/s
    (docs/records/bench_serve.md). Set before the threads start; a no-op off glibc."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(_M_ARENA_MAX, count)


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


_LIBC = _libc()
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_M_MMAP_THRESHOLD = -3  # <malloc.h>
_M_ARENA_MAX = -8

# Micro-tuning's heap, trimmed once it has grown 256 MiB: SummEval's long texts, trimmed after every group, held
# 0.78 GB where untrimmed they grew the process to 13.4 GB; 256 MiB is a few groups' logits.
trim_tuning_heap_if_grown = HeapTrimmer(256 << 20)
