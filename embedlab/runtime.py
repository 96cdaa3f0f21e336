"""The one owner of embedlab's process state and on-disk caches.

* Data root: ``configure(data_root=...)``, else ``$EMBEDLAB_DATA``, else ``../shared/data`` from the
  repository root.
* Cache root: ``configure(cache_root=...)``, else ``$EMBEDLAB_CACHE``, else ``~/.cache/embedlab``.
* In-process memos (loaded models, token-state stores, layouts, tables …) are :class:`Memo` objects made
  by :func:`memo` or :func:`cached`; nothing else in the package keeps module-level mutable state.
  :func:`clear` empties them all (tests and benchmarks call it instead of poking private names).
* On-disk arrays go through :class:`ArrayStore`: atomic writes, a checksum bound to the key, verified on
  every read; a damaged file is reported once and recomputed.
* Progress bars: :func:`set_progress` (the CLI's ``--quiet`` / ``--progress``) and :func:`show_progress`,
  which every long loop asks, so that bars go to stderr only when someone watches a terminal.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

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


def configure(*, cache_root: str | Path | None = None, data_root: str | Path | None = None) -> None:
    """Set where caches go and where the shared data is, for this process (clears every memo)."""
    _SETTINGS.cache_root = Path(cache_root).expanduser() if cache_root is not None else None
    _SETTINGS.data_root = Path(data_root).expanduser().resolve() if data_root is not None else None
    clear()


def clear() -> None:
    """Forget every in-process memo (loaded models, stores, layouts, tables); disk caches stay."""
    for store in _MEMOS.values():
        store.clear()


PROGRESS_MODES = ("auto", "quiet", "always")


def set_progress(mode: str) -> None:
    """Progress bars for this process: ``auto`` (on stderr when it is a terminal), ``quiet`` (never) or
    ``always`` (also when stderr is a file or a pipe)."""
    if mode not in PROGRESS_MODES:
        raise ValueError(f"unknown progress mode {mode!r}; expected one of {', '.join(PROGRESS_MODES)}")
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


def _writer_alive(pid: int) -> bool:
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
            if old or not _writer_alive(pid):
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


def atomic_write_bytes(path: Path, payload: bytes | Sequence[bytes | memoryview]) -> None:
    """Write ``payload`` so that readers see either the old file or the whole new one, never a part.

    ``payload`` may be a list of buffers (e.g. a header and array memory), written with one
    ``writev`` and never joined in memory. The temporary file is created with mode 0666, so the
    process umask gives it the permissions a plain ``open()`` would.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    buffers = [payload] if isinstance(payload, (bytes, bytearray, memoryview)) else list(payload)
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
        return array

    def save(self, key: str, array: np.ndarray) -> None:
        from safetensors.numpy import save as safetensors_save

        array = np.ascontiguousarray(array)
        metadata = {"key": key, "sha256": _array_digest(array)}
        try:
            atomic_write_bytes(self.path(key), safetensors_save({"array": array}, metadata=metadata))
        except OSError as error:
            warn_unwritable(cache_root(create=False) / self.kind, error)

    def get(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The stored array, or ``compute()`` stored under ``key``."""
        array = self.load(key)
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
