"""Atomic writes: readers see the old file or the whole new one, never a part; temporary files that a
killed writer left behind are swept; a cache folder that cannot be written is reported once."""

from __future__ import annotations

import io
import itertools
import os
import shutil
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from embedlab.runtime.memo import memo

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


def staging_path(target: Path) -> Path:
    """This process's staging copy of ``target`` (``.<name>.<pid>.staging`` beside it): built whole there,
    then renamed into place, so no reader sees a half-written file or folder."""
    return target.with_name(f".{target.name}.{os.getpid()}.staging")


def remove_orphan_staging(target: Path) -> list[Path]:
    """Delete the staging copies of ``target`` (files or folders) whose writer, the pid in their name, is gone."""
    removed = []
    prefix = f".{target.name}."
    for candidate in target.parent.glob(f"{prefix}*.staging"):
        pid = candidate.name[len(prefix) : -len(".staging")]
        if pid.isdigit() and not process_alive(int(pid)):
            if candidate.is_dir():
                shutil.rmtree(candidate, ignore_errors=True)
            else:
                candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


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
