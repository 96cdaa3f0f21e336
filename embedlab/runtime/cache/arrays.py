"""Checksummed arrays on disk: :class:`ArrayStore`."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from embedlab.runtime.cache.atomic import atomic_write_bytes, remove_orphan_temporaries, warn_unwritable
from embedlab.runtime.cache.budget import keep_entries, mark_recomputable, record_cache_write, record_use
from embedlab.runtime.cache.hashing import array_digest
from embedlab.runtime.cache.locks import building
from embedlab.runtime.settings import cache_dir, cache_root


def sorted_header(payload: bytes) -> bytes:
    """``payload`` (a safetensors file's bytes) with its JSON header's keys in sorted order, so that the same
    tensors and metadata give the same bytes: the library writes its metadata map in an order that changes
    from one call to the next. The header keeps its length (the same keys, the same compact JSON), so the
    tensors' offsets and bytes are untouched."""
    length = int.from_bytes(payload[:8], "little")
    header = json.loads(payload[8 : 8 + length])
    ordered = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if len(ordered) > length:
        raise ValueError(f"a safetensors header re-written in sorted order grew from {length} to {len(ordered)} bytes")
    return payload[:8] + ordered.ljust(length) + payload[8 + length :]


class ArrayStore:
    """Named float/int arrays on disk under ``cache_dir(kind)``, one safetensors file per key.

    Each file records its key and the SHA-256 of the array bytes in its metadata, checked on every read,
    so a damaged file, or one renamed onto another key, is never returned: :meth:`load` warns and gives
    ``None`` (the caller recomputes and :meth:`save` overwrites). Writes are atomic.

    Entries are recomputable cache by default, evicted least recently used under the cache budget;
    ``recomputable=False`` is for what a run produced and only that run can give again (ALIGN-SIM's
    per-item margins, read by later reports): its folder is never evicted.
    """

    def __init__(self, kind: str, *, recomputable: bool = True) -> None:
        self.kind = kind
        self.recomputable = recomputable  # False: results a run produced, kept under any cache budget

    def folder(self) -> Path:
        """``cache_dir(kind)``, with any temporary files of killed writers removed on first use; when the
        folder cannot be made (read-only cache) it is only named, and writes into it warn once."""
        try:
            folder = cache_dir(self.kind)
        except OSError:
            return cache_root(create=False) / self.kind
        remove_orphan_temporaries(folder)
        if self.recomputable:
            mark_recomputable(folder)
        else:
            keep_entries(folder)
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
        if header.get("key") != key or header.get("sha256") != array_digest(array):
            self._damaged(path, "checksum or key mismatch")
            return None
        record_use(path)
        return array

    def save(self, key: str, array: np.ndarray) -> None:
        from safetensors.numpy import save as safetensors_save

        array = np.ascontiguousarray(array)
        metadata = {"key": key, "sha256": array_digest(array)}
        payload = sorted_header(safetensors_save({"array": array}, metadata=metadata))
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
