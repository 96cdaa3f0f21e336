"""The one owner of embedlab's process state and on-disk caches.

* Data root: ``configure(data_root=...)``, else ``$EMBEDLAB_DATA``, else ``../shared/data`` from the
  repository root.
* Cache root: ``configure(cache_root=...)``, else ``$EMBEDLAB_CACHE``, else ``~/.cache/embedlab``.
* Cache budget: ``configure(cache_max=...)``, else ``$EMBEDLAB_CACHE_MAX`` (``500M``, ``2G``, bytes), else
  2 GiB, over everything under the cache root. Entries that their owner can recompute (every
  :class:`ArrayStore` file, every token-state pack) live in folders marked recomputable; after each write
  the least recently used of them are deleted until the whole cache fits the budget (see
  :func:`record_cache_write`). Reads record use by touching the file's modification time.
* Memory cache: ``configure(memory_cache_bytes=...)`` bounds the in-process token-state cache (256 MiB).
* Token-state layers kept: ``configure(cache_layers=...)``, else ``$EMBEDLAB_CACHE_LAYERS``: ``spec`` (the
  default: only the layers a method reads) or ``all`` (what a research grid asks for, see
  :mod:`embedlab.tokens.states`).
* In-process memos (loaded models, token-state stores, layouts, tables …) are :class:`Memo` objects made
  by :func:`memo` or :func:`cached`; nothing else in the package keeps module-level mutable state.
  :func:`clear` empties them all (tests and benchmarks call it instead of poking private names).
* On-disk arrays go through :class:`ArrayStore`: atomic writes, a checksum bound to the key, verified on
  every read; a damaged file is reported once and recomputed. Processes sharing a cache (test workers,
  parallel runs) compute a missing entry once: :func:`building` locks it while one of them computes.
* Progress bars: :func:`set_progress` (the CLI's ``--quiet`` / ``--progress``) and :func:`show_progress`,
  which every long loop asks, so that bars go to stderr only when someone watches a terminal.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import io
import itertools
import json
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from embedlab.errors import InputError

REPO_ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


class Memo:
    """A named in-process memo, least-recently-used first out when ``maxsize`` entries are exceeded."""

    def __init__(self, name: str, maxsize: int | None = None) -> None:
        self.name = name
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value stored under ``key``, computed by ``compute()`` (and stored) when missing."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = compute()
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while self.maxsize is not None and len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self.get(key, lambda: value)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class _Settings:
    """What :func:`configure` set (``None``: fall back to the environment, then the default)."""

    cache_root: Path | None = None
    data_root: Path | None = None
    progress: str = "auto"
    store_token_states: bool = True
    cache_max: int | None = None
    memory_cache_bytes: int | None = None
    cache_layers: str | None = None


CACHE_MAX_VARIABLE = "EMBEDLAB_CACHE_MAX"
DEFAULT_CACHE_MAX = 2 << 30  # 2 GiB: a few grids' worth of token states, small next to any disk
DEFAULT_MEMORY_CACHE_BYTES = 256 << 20  # one layer of ≈ 5,000 WikiText-2 sentences; grids ask for more
CACHE_LAYERS_VARIABLE = "EMBEDLAB_CACHE_LAYERS"
CACHE_LAYER_CHOICES = ("spec", "all")
RECOMPUTABLE_MARKER = ".recomputable"  # a folder whose entry files may be deleted at any time
ENTRY_SUFFIXES = (".safetensors", ".pack")  # the files a recomputable folder's owner recomputes
_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


_MEMOS: dict[str, Memo] = {}
_SETTINGS = _Settings()


def memo(name: str, maxsize: int | None = None) -> Memo:
    """The process-wide memo called ``name`` (created on first use)."""
    if name not in _MEMOS:
        _MEMOS[name] = Memo(name, maxsize)
    return _MEMOS[name]


def cached(name: str, maxsize: int | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: memoise a function of hashable arguments in the runtime memo ``name``."""

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        store = memo(name, maxsize)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            key = (args, tuple(sorted(kwargs.items())))
            return store.get(key, lambda: function(*args, **kwargs))

        return wrapper

    return decorate


def configure(
    *,
    cache_root: str | Path | None = None,
    data_root: str | Path | None = None,
    cache_max: int | str | None = None,
    memory_cache_bytes: int | str | None = None,
    cache_layers: str | None = None,
) -> None:
    """Set where caches go, where the shared data is, the disk-cache budget and the in-memory token-state
    cache's size and which token-state layers are kept (``"spec"`` or ``"all"``), for this process (clears
    every memo). ``None`` falls back to the environment, then
    the default; sizes are bytes or strings such as ``"500M"``."""
    _SETTINGS.cache_root = Path(cache_root).expanduser() if cache_root is not None else None
    _SETTINGS.data_root = Path(data_root).expanduser().resolve() if data_root is not None else None
    _SETTINGS.cache_max = parse_size(cache_max, "cache_max") if cache_max is not None else None
    _SETTINGS.memory_cache_bytes = parse_size(memory_cache_bytes, "memory_cache_bytes") if memory_cache_bytes is not None else None
    if cache_layers is not None and cache_layers not in CACHE_LAYER_CHOICES:
        raise InputError(f"cache_layers={cache_layers!r}: choose one of {', '.join(CACHE_LAYER_CHOICES)}")
    _SETTINGS.cache_layers = cache_layers
    clear()


def parse_size(value: int | str, name: str) -> int:
    """Bytes from ``1048576``, ``"500M"``, ``"2G"``, ``"1.5GiB"`` (binary units); a ValueError naming ``name``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InputError(f"{name}={value} is negative; give a size in bytes")
        return value
    text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in _SIZE_UNITS else (text, "")
    try:
        size = float(number)
    except ValueError:
        size = -1.0
    if not size >= 0 or size == float("inf"):
        raise InputError(f"{name}={value!r} is not a size: give bytes or a number with K, M, G or T (e.g. 500M, 2G)")
    return int(size * _SIZE_UNITS[unit])


def cache_budget() -> int:
    """The most bytes the whole cache folder may hold (see the module docstring)."""
    if _SETTINGS.cache_max is not None:
        return _SETTINGS.cache_max
    configured = os.environ.get(CACHE_MAX_VARIABLE, "").strip()
    return parse_size(configured, CACHE_MAX_VARIABLE) if configured else DEFAULT_CACHE_MAX


def cache_layers() -> str:
    """``"spec"``: model runs keep only the token-state layers asked for; ``"all"``: every layer (grids)."""
    if _SETTINGS.cache_layers is not None:
        return _SETTINGS.cache_layers
    configured = os.environ.get(CACHE_LAYERS_VARIABLE, "").strip() or "spec"
    if configured not in CACHE_LAYER_CHOICES:
        raise InputError(f"{CACHE_LAYERS_VARIABLE}={configured!r}: choose one of {', '.join(CACHE_LAYER_CHOICES)}")
    return configured


def memory_cache_bytes() -> int:
    """The byte bound of the in-process token-state cache."""
    return _SETTINGS.memory_cache_bytes if _SETTINGS.memory_cache_bytes is not None else DEFAULT_MEMORY_CACHE_BYTES


def stores_token_states() -> bool:
    """Whether model runs keep token states in the caches (see :func:`token_states_uncached`)."""
    return _SETTINGS.store_token_states


@contextlib.contextmanager
def token_states_uncached() -> Iterator[None]:
    """Within this block model runs keep no token states, neither in the disk cache nor in the in-memory
    one (entries already there are still read). A corpus embedded into shards reads every text once and its shards are the result, so
    storing its token states would cost disk and time and, past the budget, evict what reruns need."""
    before = _SETTINGS.store_token_states
    set_token_state_storing(False)
    try:
        yield
    finally:
        set_token_state_storing(before)


def set_token_state_storing(enabled: bool) -> None:
    """Whether this process's model runs keep token states in the caches from now on (default yes)."""
    _SETTINGS.store_token_states = bool(enabled)


def release_free_memory() -> None:
    """Hand memory that Python and torch have freed back to the operating system (glibc's ``malloc_trim``).

    glibc keeps freed heap pages for reuse, and the varying tensor shapes of a long run fragment its arenas,
    so a corpus run's resident memory crept up with the number of texts (0.88 → 1.02 GB over its first
    7,680 texts here) although nothing it held grew; trimming after each slice kept it flat (0.71 GB).
    A no-op where the C library has no ``malloc_trim`` (macOS, musl)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


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


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


_LIBC = _libc()
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)
_M_MMAP_THRESHOLD = -3  # <malloc.h>


def clear() -> None:
    """Forget every in-process memo (loaded models, stores, layouts, tables); disk caches stay."""
    for store in _MEMOS.values():
        store.clear()


PROGRESS_MODES = ("auto", "quiet", "always")


def set_progress(mode: str) -> None:
    """Progress bars for this process: ``auto`` (on stderr when it is a terminal), ``quiet`` (never) or
    ``always`` (also when stderr is a file or a pipe)."""
    if mode not in PROGRESS_MODES:
        raise InputError(f"unknown progress mode {mode!r}; expected one of {', '.join(PROGRESS_MODES)}")
    _SETTINGS.progress = mode


def show_progress(requested: bool | None = None) -> bool:
    """Whether a long loop draws its progress bar: never when quiet; else the caller's explicit choice
    (``show_progress_bar=True/False``), else only when stderr is a terminal or bars are forced, so that
    piped or logged output holds no bar fragments."""
    if _SETTINGS.progress == "quiet":
        return False
    if requested is not None:
        return bool(requested)
    return _SETTINGS.progress == "always" or (sys.stderr is not None and sys.stderr.isatty())


def progress_bar(iterable=None, **options):
    """A tqdm bar on stderr, drawn when :func:`show_progress` says so (``disable`` overrides that)."""
    from tqdm.auto import tqdm

    options.setdefault("disable", not show_progress())
    return tqdm(iterable, file=sys.stderr, **options)


class MissingExtraError(ImportError):
    """An optional dependency group is not installed; the message names the extra that provides it."""

    def __init__(self, extra: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs the optional '{extra}' dependencies: pip install 'embedlab[{extra}]'")
        self.extra = extra


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (plots are written, never shown), or a clear
    error naming the ``plots`` extra when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError as error:
        raise MissingExtraError("plots", "drawing plots (matplotlib)") from error
    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # labels hold user text (dataset names): drawn literally, never as mathtext
    import matplotlib.pyplot as plt

    return plt


def status(message: str) -> None:
    """One status line on stderr (unless quiet), printed above any progress bar instead of through it."""
    if _SETTINGS.progress != "quiet":
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)


def data_root() -> Path:
    """The folder holding the shared evaluation data (see its README)."""
    if _SETTINGS.data_root is not None:
        return _SETTINGS.data_root
    configured = os.environ.get("EMBEDLAB_DATA")
    return Path(configured).expanduser().resolve() if configured else (REPO_ROOT.parent / "shared" / "data").resolve()


def data_path(*parts: str) -> Path:
    """A file or folder inside the data root; a clear error when it is missing."""
    root = data_root()
    path = root.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"data file not found: {path} (data root searched: {root}; "
            "set EMBEDLAB_DATA to the folder that holds the shared data)"
        )
    return path


def cache_root(create: bool = True) -> Path:
    """The folder for every cache embedlab writes (token states, static tables, unpacked models);
    ``create=False`` names it without making it (for a cache that may be read-only)."""
    cache_budget()  # a bad EMBEDLAB_CACHE_MAX is reported before any work, not at the first write
    configured = _SETTINGS.cache_root or os.environ.get("EMBEDLAB_CACHE")
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "embedlab"
    if create:
        root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


_TEMPORARY_NAMES = itertools.count()
_ORPHAN_AGE_SECONDS = 3600  # a temporary file this old is abandoned even if its pid was reused
_SWEPT_FOLDERS = memo("runtime.swept cache folders")
_UNWRITABLE_WARNED = memo("runtime.unwritable cache folders")


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` is running (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to someone else
        return True
    return True


def remove_orphan_temporaries(folder: Path) -> list[Path]:
    """Delete the temporary files a killed writer left in ``folder`` (once per folder and process).

    :func:`atomic_write_bytes` names them ``.<name>.<pid>.<thread>.<n>.tmp``; one whose pid is no longer
    running, or that is over an hour old, can never be renamed into place. Returns what was removed.
    """
    removed: list[Path] = []

    def sweep() -> bool:
        for candidate in folder.glob(".*.tmp"):
            parts = candidate.name.rsplit(".", 5)
            try:
                pid = int(parts[-4])
                old = time.time() - candidate.stat().st_mtime > _ORPHAN_AGE_SECONDS
            except (IndexError, ValueError, OSError):
                continue
            if old or not process_alive(pid):
                try:
                    candidate.unlink()
                    removed.append(candidate)
                except OSError:
                    pass  # a read-only folder: nothing to clean, nothing to break
        return True

    _SWEPT_FOLDERS.get(str(folder), sweep)
    return removed


def warn_unwritable(folder: Path, error: OSError) -> None:
    """Warn, once per folder and process, that a cache folder cannot be written (read-only, full disk):
    the caller goes on computing without caching."""

    def warn() -> bool:
        warnings.warn(f"embedlab cache {folder} is not writable ({error.strerror or error}); "
                      "continuing without caching", RuntimeWarning, stacklevel=4)
        return True

    _UNWRITABLE_WARNED.get(str(folder), warn)


_CACHE_BYTES = memo("runtime.cache bytes")  # cache root -> [bytes]: the last scan plus this process's writes since


def mark_recomputable(folder: Path) -> None:
    """Declare that the entry files directly in ``folder`` (``*.safetensors``, ``*.pack``) may be evicted:
    its owner recomputes a missing entry. A read-only folder is left as it is."""
    marker = folder / RECOMPUTABLE_MARKER
    if not marker.exists():
        try:
            marker.touch()
        except OSError:
            pass  # nothing can be written there, so nothing will need evicting either


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


def evict_to_budget(budget: int | None = None) -> int:
    """Delete the least recently used evictable entries until the cache holds at most ``budget`` bytes
    (default :func:`cache_budget`); returns the bytes left. Files that are not recomputable (trained
    weights, checkpoints, unpacked models) count towards the total but are never deleted."""
    root = cache_root(create=False)
    budget = cache_budget() if budget is None else budget
    if not root.is_dir():
        return 0
    total, candidates, _ = _scan(root)
    for _, size, path in sorted(candidates, key=lambda candidate: candidate[0]):
        if total <= budget:
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
    """Account for ``nbytes`` just written to the cache and evict down to the budget when over it.

    The first write in a process scans the cache; later ones add to that figure and scan again only
    when it passes the budget, so a write costs a directory walk only when eviction may be due (another
    process's writes are seen at that walk).
    """
    root = cache_root(create=False)
    known = _CACHE_BYTES.get(str(root), lambda: [-1])
    if known[0] >= 0:
        known[0] += nbytes
    if known[0] < 0 or known[0] > cache_budget():
        known[0] = evict_to_budget()


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


def atomic_write_bytes(path: Path, payload: bytes | Sequence[bytes | memoryview]) -> None:
    """Write ``payload`` so that readers see either the old file or the whole new one, never a part.

    ``payload`` may be a list of buffers (e.g. a header and array memory), written with one
    ``writev`` and never joined in memory. The temporary file is created with mode 0666, so the
    process umask gives it the permissions a plain ``open()`` would. A symlink at ``path`` is replaced
    by the new file (its target is left alone); a device or pipe (``/dev/stdout``) is written to as it is.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffers = [payload] if isinstance(payload, (bytes, bytearray, memoryview)) else list(payload)
    if not path.is_symlink() and path.exists() and not path.is_file() and not path.is_dir():
        descriptor = os.open(path, os.O_WRONLY)
        try:
            _write_all(descriptor, buffers)
        finally:
            os.close(descriptor)
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{next(_TEMPORARY_NAMES)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            _write_all(descriptor, buffers)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(Path(path), text.encode("utf-8"))


def save_figure(figure, path: Path, **options: object) -> None:
    """A matplotlib figure saved to ``path`` atomically (rendered in memory, then one atomic write); the
    format follows the suffix as ``savefig`` would."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=Path(path).suffix.lstrip(".").lower() or "png", **options)
    atomic_write_bytes(Path(path), buffer.getbuffer())


def _write_all(descriptor: int, buffers: list) -> None:
    views = [memoryview(buffer).cast("B") for buffer in buffers]
    views = [view for view in views if len(view)]
    while views:
        written = os.writev(descriptor, views[:1024])  # IOV_MAX is 1024 on Linux
        while written and views:  # a short write: drop what went out, keep the rest
            if written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][written:]
                written = 0


BUILD_WAIT_SECONDS = 1800.0  # past this a waiting process stops waiting and builds its own copy


@contextlib.contextmanager
def building(path: Path, wait: float | None = None) -> Iterator[bool]:
    """Hold the build lock of the cache entry ``path`` while computing it, so that two processes that
    need the same missing entry (two test workers, two CLI runs) compute it once: the second waits, then
    finds the entry the first wrote. Use it as ``with building(path): load, else compute and write``.

    The lock is an ``flock`` on ``.<name>.lock`` beside the entry (filelock), so the kernel releases it
    when its holder dies, even by SIGKILL; the waiter then takes it and builds the entry itself. Entries
    are still written by :func:`atomic_write_bytes`, so a reader never sees half a file whether or not it
    took the lock. Yields whether the lock is held: where it cannot be made (a read-only folder) or after
    ``wait`` seconds (default :data:`BUILD_WAIT_SECONDS`), the caller builds its own copy unlocked.
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


class ArrayStore:
    """Named float/int arrays on disk under ``cache_dir(kind)``, one safetensors file per key.

    Each file records its key and the SHA-256 of the array bytes in its metadata, checked on every read,
    so a damaged file, or one renamed onto another key, is never returned: :meth:`load` warns and gives
    ``None`` (the caller recomputes and :meth:`save` overwrites). Writes are atomic.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def folder(self) -> Path:
        """``cache_dir(kind)``, with any temporary files of killed writers removed on first use; when the
        folder cannot be made (read-only cache) it is only named, and writes into it warn once."""
        try:
            folder = cache_dir(self.kind)
        except OSError:
            return cache_root(create=False) / self.kind
        remove_orphan_temporaries(folder)
        mark_recomputable(folder)
        return folder

    def path(self, key: str) -> Path:
        return self.folder() / f"{key}.safetensors"

    def load(self, key: str) -> np.ndarray | None:
        from safetensors.numpy import load as safetensors_load

        path = self.path(key)
        if not path.exists():
            return None
        try:
            payload = path.read_bytes()
            header = json.loads(payload[8 : 8 + int.from_bytes(payload[:8], "little")]).get("__metadata__", {})
            array = safetensors_load(payload)["array"]
        except Exception as error:  # noqa: BLE001 - any unreadable file is a damaged cache entry
            self._damaged(path, f"unreadable ({type(error).__name__})")
            return None
        if header.get("key") != key or header.get("sha256") != _array_digest(array):
            self._damaged(path, "checksum or key mismatch")
            return None
        record_use(path)
        return array

    def save(self, key: str, array: np.ndarray) -> None:
        from safetensors.numpy import save as safetensors_save

        array = np.ascontiguousarray(array)
        metadata = {"key": key, "sha256": _array_digest(array)}
        payload = safetensors_save({"array": array}, metadata=metadata)
        try:
            atomic_write_bytes(self.path(key), payload)
        except OSError as error:
            warn_unwritable(cache_root(create=False) / self.kind, error)
            return
        record_cache_write(len(payload))

    def get(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The stored array, or ``compute()`` stored under ``key``; a process that finds another one
        computing the same key waits for its file instead of computing it twice (:func:`building`)."""
        array = self.load(key)
        if array is None:
            with building(self.path(key)):
                array = self.load(key)  # written by the process that held the lock meanwhile
                if array is None:
                    array = compute()
                    self.save(key, array)
        return array

    @staticmethod
    def _damaged(path: Path, why: str) -> None:
        warnings.warn(f"damaged cache file {path} ({why}); recomputing it", RuntimeWarning, stacklevel=3)


def _array_digest(array: np.ndarray) -> str:
    digest = hashlib.sha256(str((array.dtype.str, array.shape)).encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def cache_key(*parts: object) -> str:
    """A short stable key for the JSON-serialisable ``parts`` (spec, fingerprint, options, text hash …)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 of a list of texts, length-prefixed so no two lists hash alike."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()
