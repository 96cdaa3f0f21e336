"""Where embedlab finds the shared data and keeps its caches.

* Data root: ``$EMBEDLAB_DATA`` or ``../shared/data`` from the repository root.
* Cache root: ``$EMBEDLAB_CACHE`` or ``~/.cache/embedlab``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it; done once, at import
    os.umask(mask)
    return mask


_UMASK = _read_umask()


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


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write ``payload`` so that readers see either the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        # mkstemp creates the file private (0600); give it the permissions a plain open() would
        os.chmod(temporary, 0o666 & ~_UMASK)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
