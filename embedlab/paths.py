"""Where embedlab finds the shared data and keeps its caches.

* Data root: ``$EMBEDLAB_DATA`` or ``../shared/data`` from the repository root.
* Cache root: ``$EMBEDLAB_CACHE`` or ``~/.cache/embedlab``.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_root() -> Path:
    """The folder holding the shared evaluation data (see its README)."""
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


def cache_root() -> Path:
    """The folder for every cache embedlab writes (token states, static tables, unpacked models)."""
    configured = os.environ.get("EMBEDLAB_CACHE")
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "embedlab"
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


_TEMPORARY_NAMES = itertools.count()


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
