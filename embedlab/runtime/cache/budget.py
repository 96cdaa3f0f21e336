"""The cache budget: the whole cache folder holds at most :func:`embedlab.runtime.settings.cache_budget`
bytes. Entries that their owner can recompute (every :class:`~embedlab.runtime.cache.arrays.ArrayStore`
file, every token-state pack) live in folders marked recomputable; after each write the least recently
used of them are deleted until the whole cache fits the budget (see :func:`record_cache_write`). Reads
record use by touching the file's modification time."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from embedlab.runtime.memo import memo
from embedlab.runtime.settings import cache_budget, cache_root

RECOMPUTABLE_MARKER = ".recomputable"  # a folder whose entry files may be deleted at any time
ENTRY_SUFFIXES = (".safetensors", ".pack")  # the files a recomputable folder's owner recomputes

_CACHE_BYTES = memo("runtime.cache bytes")  # cache root -> [bytes]: the last scan plus this process's writes since
# Eviction after a write goes down to this share of the budget, not to the budget itself: evicted exactly to the
# budget, a long run's every next write passed it again and walked the whole cache (a neural run over QQP's
# 26,431 texts, its frozen features 2 GB past the default budget, slowed from 22 to about 2 texts per second
# stat-ing some 30,000 files per write). With the margin a walk comes once per tenth of the budget written.
EVICT_TO_FRACTION = 0.9


def mark_recomputable(folder: Path) -> None:
    """Declare that the entry files directly in ``folder`` (``*.safetensors``, ``*.pack``) may be evicted:
    its owner recomputes a missing entry. A read-only folder is left as it is."""
    marker = folder / RECOMPUTABLE_MARKER
    if not marker.exists():
        try:
            marker.touch()
        except OSError:
            pass  # nothing can be written there, so nothing will need evicting either


def keep_entries(folder: Path) -> None:
    """Declare that the entry files in ``folder`` are kept under any budget (results, not cache): a marker
    an earlier version left there is removed. A read-only folder is left as it is."""
    try:
        (folder / RECOMPUTABLE_MARKER).unlink(missing_ok=True)
    except OSError:
        pass  # nothing can be written there, so nothing will be evicted from it either


def record_use(path: Path) -> None:
    """Note that a cache entry was just read (its modification time is its last use, for eviction)."""
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache: it cannot grow either


@dataclass(frozen=True)
class CacheKind:
    """What one top-level folder of the cache holds (``embedlab cache info``)."""

    name: str
    bytes: int
    entries: int  # evictable entry files (packs, safetensors)
    recomputable: bool  # every entry file in it may be evicted


def _scan(root: Path) -> tuple[int, list[tuple[int, int, Path]], dict[str, list[int]]]:
    """(total bytes under ``root``, evictable entries as (last use ns, bytes, path), per kind [bytes, entries, marked])."""
    total = 0
    candidates: list[tuple[int, int, Path]] = []
    kinds: dict[str, list[int]] = {}
    for folder, _, files in os.walk(root):  # symbolic links are counted, never followed
        marked = RECOMPUTABLE_MARKER in files
        relative = Path(folder).relative_to(root).parts
        kind = kinds.setdefault(relative[0], [0, 0, 0]) if relative else None
        if kind is not None and marked:
            kind[2] = 1
        for name in files:
            try:
                status = os.lstat(os.path.join(folder, name))
            except OSError:
                continue  # removed by another process meanwhile
            total += status.st_size
            if kind is not None:
                kind[0] += status.st_size
            if marked and name.endswith(ENTRY_SUFFIXES) and not name.startswith("."):
                candidates.append((status.st_mtime_ns, status.st_size, Path(folder) / name))
                if kind is not None:
                    kind[1] += 1
    return total, candidates, kinds


def cache_kinds() -> list[CacheKind]:
    """Every top-level folder of the cache with its size and evictable entries, largest first."""
    root = cache_root(create=False)
    if not root.is_dir():
        return []
    _, _, kinds = _scan(root)
    return sorted((CacheKind(name, size, entries, bool(marked)) for name, (size, entries, marked) in kinds.items()),
                  key=lambda kind: -kind.bytes)


def cache_size() -> int:
    """Bytes under the cache root (files of every kind)."""
    root = cache_root(create=False)
    return _scan(root)[0] if root.is_dir() else 0


def evict_to_budget(budget: int | None = None, target: int | None = None) -> int:
    """When the cache holds more than ``budget`` bytes (default :func:`cache_budget`), delete the least recently
    used evictable entries until it holds at most ``target`` (default: ``budget``); returns the bytes left. Files
    that are not recomputable (trained weights, checkpoints, unpacked models) count towards the total but are
    never deleted."""
    root = cache_root(create=False)
    budget = cache_budget() if budget is None else budget
    target = budget if target is None else min(target, budget)
    if not root.is_dir():
        return 0
    total, candidates, _ = _scan(root)
    if total <= budget:
        return total
    for _, size, path in sorted(candidates, key=lambda candidate: candidate[0]):
        if total <= target:
            break
        try:
            path.unlink()
        except FileNotFoundError:
            pass  # evicted by another process
        except OSError:
            continue  # a read-only folder: nothing to reclaim there
        total -= size
    return total


def record_cache_write(nbytes: int) -> None:
    """Account for ``nbytes`` just written to the cache and, when that passes the budget, evict down to
    :data:`EVICT_TO_FRACTION` of it.

    The first write in a process scans the cache; later ones add to that figure and scan again only
    when it passes the budget, so a write costs a directory walk only when eviction may be due (another
    process's writes are seen at that walk), and a run writing on and on walks once per tenth of the budget.
    """
    root = cache_root(create=False)
    known = _CACHE_BYTES.get(str(root), lambda: [-1])
    if known[0] >= 0:
        known[0] += nbytes
    if known[0] < 0 or known[0] > cache_budget():
        known[0] = evict_to_budget(target=int(cache_budget() * EVICT_TO_FRACTION))


def clear_cache(kind: str | None = None) -> int:
    """Delete every recomputable folder of the cache (or only those under the top-level folder ``kind``);
    returns the bytes freed. Folders that are not recomputable are kept."""
    root = cache_root(create=False)
    if not root.is_dir():
        return 0
    freed = 0
    for folder, subfolders, files in os.walk(root):
        path = Path(folder)
        if RECOMPUTABLE_MARKER in files and (kind is None or path.relative_to(root).parts[:1] == (kind,)):
            for name in files:
                if name != RECOMPUTABLE_MARKER:  # the folder stays recomputable
                    freed += os.lstat(path / name).st_size
                    (path / name).unlink(missing_ok=True)
            subfolders.clear()
    _CACHE_BYTES.clear()
    return freed
