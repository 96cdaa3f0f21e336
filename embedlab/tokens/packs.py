"""The token-state disk cache of one model: entries appended to pack files, found through a SQLite index.

Each entry carries a checksum and its own key (:mod:`embedlab.tokens.entry`), so an entry that fails to
load or verify, or an index row that points at another entry, is recomputed. A damaged index is moved
aside and a new one built; a cache folder that cannot be written (read-only, full) is warned about once
and the states are computed without caching. Packs count towards the cache budget
(``EMBEDLAB_CACHE_MAX``) and the least recently read are evicted whole (:mod:`embedlab.runtime`); an
evicted entry is recomputed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from embedlab.runtime.cache.atomic import atomic_write_bytes, remove_orphan_temporaries, warn_unwritable
from embedlab.runtime.cache.budget import mark_recomputable, record_cache_write, record_use
from embedlab.tokens.entry import TokenStates

logger = logging.getLogger(__name__)


class PackStore:
    """The disk cache of one model: entries appended to pack files, found through a SQLite index.

    One file per text was the obvious layout, but creating thousands of small files costs the kernel
    about a millisecond each here (≈ 3 s of system time for STS-B test's 2,758 sentences, against
    0.2 s to write the same 480 MB as one file), more than the model run saves. So every batch of new
    entries becomes one pack, written atomically (temporary file, then rename) before the index
    learns of it; each entry keeps its own checksum, so a damaged entry is detected when read and
    recomputed into a new pack, and its index row is replaced. Packs are written on the calling thread:
    a background writer measured no faster here, the model already keeping both cores busy.

    Packs are the unit of the cache budget: reading a pack records its use, eviction deletes whole
    packs, and the index rows of a pack found missing are dropped (its entries are recomputed).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index_path = folder / "index.sqlite"
        if folder.is_dir():
            remove_orphan_temporaries(folder)
            mark_recomputable(folder)

    @contextmanager
    def _index(self) -> Iterator[sqlite3.Connection]:
        """A connection to the index; a damaged index (not SQLite, malformed) is moved aside first."""
        connection = sqlite3.connect(self.index_path, timeout=120)
        try:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, pack TEXT NOT NULL, "
                "offset INTEGER NOT NULL, length INTEGER NOT NULL)"
            )
            yield connection
        except sqlite3.OperationalError:
            raise  # locked, unreadable folder …: not damage, the callers decide
        except sqlite3.DatabaseError as error:
            connection.close()
            self._move_index_aside(error)
            raise _IndexMovedAside from error
        finally:
            connection.close()

    def _move_index_aside(self, error: sqlite3.DatabaseError) -> None:
        """Rename a damaged index (and its journal) to ``index.sqlite.damaged-<time>``, so that the next
        connection starts a new one, and say so: the entries it indexed are recomputed as they are asked for."""
        aside = self.index_path.with_name(f"{self.index_path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            os.replace(self.index_path, aside)
        except FileNotFoundError:
            return  # another process moved it aside first
        for suffix in ("-journal", "-wal", "-shm"):
            sidecar = self.index_path.with_name(self.index_path.name + suffix)
            if sidecar.exists():
                os.replace(sidecar, aside.with_name(aside.name + suffix))
        warnings.warn(f"damaged token-state index {self.index_path} ({error}) moved aside to {aside}; "
                      "a new index is built and its entries are recomputed", RuntimeWarning, stacklevel=5)

    def locations(self, keys: Sequence[str]) -> dict[str, tuple[str, int, int]]:
        """key -> (pack file name, byte offset, byte length) for the keys the index holds."""
        if not self.index_path.exists():
            return {}
        found: dict[str, tuple[str, int, int]] = {}
        try:
            with self._index() as connection:
                for start in range(0, len(keys), 500):  # stay below SQLite's limit on bound parameters
                    chunk = list(keys[start : start + 500])
                    marks = ",".join("?" * len(chunk))
                    for key, pack, offset, length in connection.execute(
                        f"SELECT key, pack, offset, length FROM entries WHERE key IN ({marks})", chunk
                    ):
                        found[key] = (pack, offset, length)
        except _IndexMovedAside:
            return {}
        except sqlite3.OperationalError as error:
            logger.warning("recomputing token states: index %s is unreadable (%s)", self.index_path, error)
            return {}
        return found

    def read(self, keys: Sequence[str]) -> dict[str, TokenStates]:
        """The intact entries among ``keys``; damaged or missing ones are logged and left out."""
        located = self.locations(keys)
        by_pack: dict[str, list[tuple[int, int, str]]] = {}
        for key, (pack, offset, length) in located.items():
            by_pack.setdefault(pack, []).append((offset, length, key))
        entries: dict[str, TokenStates] = {}
        for pack, items in by_pack.items():
            path = self.folder / pack
            try:
                stream = open(path, "rb")
            except FileNotFoundError:  # evicted to keep the cache budget (or deleted by hand)
                logger.info("recomputing %d token-state entries: pack %s was evicted", len(items), path)
                self._forget_pack(pack)
                continue
            except OSError as error:
                logger.warning("recomputing %d token-state entries: pack %s is unreadable (%s)", len(items), path, error)
                continue
            record_use(path)
            with stream:
                for offset, length, key in sorted(items):
                    stream.seek(offset)
                    try:
                        payload = stream.read(length)
                        if len(payload) != length:
                            raise ValueError(f"entry truncated ({len(payload)} of {length} bytes)")
                        entries[key] = TokenStates.from_bytes(payload, key)
                    except (ValueError, OSError) as error:
                        logger.warning("recomputing damaged token-state cache entry %s in %s (%s)", key[:16], path, error)
        return entries

    def write(self, items: Sequence[tuple[str, TokenStates]]) -> None:
        """Append ``items`` as one new pack and point the index at it; a folder that cannot be written
        warns once and the entries stay uncached."""
        buffers: list[bytes | memoryview] = []
        rows = []
        offset = 0
        digest = hashlib.sha256()
        for key, states in items:
            pieces = states.to_buffers(key)
            length = sum(memoryview(piece).nbytes for piece in pieces)
            buffers.extend(pieces)
            rows.append((key, offset, length))
            offset += length
            digest.update(key.encode("ascii"))
        pack = f"{digest.hexdigest()[:32]}.pack"
        rows = [(key, pack, start, length) for key, start, length in rows]
        try:
            atomic_write_bytes(self.folder / pack, buffers)
            try:
                self._insert(rows)
            except _IndexMovedAside:
                self._insert(rows)  # into the new index
        except (OSError, sqlite3.OperationalError) as error:
            warn_unwritable(self.folder, error if isinstance(error, OSError) else OSError(str(error)))
            return
        record_cache_write(offset)

    def _forget_pack(self, pack: str) -> None:
        """Drop the index rows of a pack that is gone, so later reads do not look for it."""
        try:
            with self._index() as connection, connection:
                connection.execute("DELETE FROM entries WHERE pack = ?", (pack,))
        except (_IndexMovedAside, sqlite3.OperationalError):
            pass  # a read-only or locked index: the rows only cost a failed open next time

    def _insert(self, rows: list[tuple[str, str, int, int]]) -> None:
        with self._index() as connection, connection:
            connection.executemany("INSERT OR REPLACE INTO entries (key, pack, offset, length) VALUES (?, ?, ?, ?)", rows)


class _IndexMovedAside(Exception):
    """Raised inside :class:`PackStore` after a damaged index was moved aside (its rows are gone)."""


def indexed_entries(folder: Path) -> int:
    """Token-state entries (text × layer) the indexes under ``folder`` (``<cache>/token_states``) point at,
    for ``embedlab cache info``; rows of evicted packs are counted until a read drops them."""
    total = 0
    for index_path in sorted(folder.glob("*/index.sqlite")):
        try:
            connection = sqlite3.connect(f"file:{index_path}?mode=ro", uri=True)
            try:
                total += connection.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            finally:
                connection.close()
        except sqlite3.Error:
            continue  # damaged or locked: it is moved aside or read when next used
    return total
