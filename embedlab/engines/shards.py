"""The output folder of ``embedlab embed … --out FOLDER``: Parquet shards plus a ``manifest.json``.

Layout (one format, whatever the engine)::

    FOLDER/manifest.json        what was asked (spec, method fingerprint, code version, shard size, input
                                identity) and what is finished (each shard's rows and sha256)
    FOLDER/fitted-0.safetensors statistics fitted on the whole corpus (target-fitted specs only)
    FOLDER/shard-00000.parquet  columns ``id`` (int64 or string), ``vector`` (fixed-size list of float32) and
                                ``text_hash`` (uint64, :func:`text_hash` of each row's text)
    FOLDER/shard-00001.parquet  …

Why this shape: every shard and every manifest version is written with
:func:`embedlab.runtime.cache.atomic.atomic_write_bytes`, and a shard enters the manifest only after it is on disk, so
a run killed at any instant (``kill -9`` included) leaves only whole shards that the manifest vouches for;
the next run checks them (size and sha256) and starts at the first shard not listed. Parquet keeps the
ids beside the vectors in one file, so a shard can never be half of a pair of files; :func:`read_shards`
returns the vectors as one float32, C-contiguous matrix (what FAISS's ``index.add`` takes).
"""

from __future__ import annotations

import hashlib
import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from embedlab.engines.parquet_vectors import VECTOR_DTYPES, read_shard, read_text_hashes, shard_bytes
from embedlab.engines.resume import comparable, difference
from embedlab.errors import InputError
from embedlab.runtime.cache.atomic import atomic_write_bytes, remove_orphan_temporaries
from embedlab.runtime.cache.hashing import file_sha256
from embedlab.runtime.outputs import same_path

ENGINES = ("local", "ray")
DEFAULT_SHARD_SIZE = 10_000

MANIFEST_NAME = "manifest.json"
LOCK_NAME = ".embedlab.lock"
LAYOUT_VERSION = 1
# bytes a shard row costs beyond its vector (parquet framing, the id), and a margin on the whole estimate
_ROW_OVERHEAD_BYTES = 32
_DISK_MARGIN = 1.1


_RUN_FILE = re.compile(r"(shard-\d+\.parquet|fitted-\d+\.safetensors|\..*\.tmp)")
_SHARD_OR_FITTED = re.compile(r"shard-\d{5,}\.parquet|fitted-\d+\.safetensors")  # the names a run gives


class OutputFolderError(InputError):
    """An output folder that cannot take this run (another run's folder, not a folder, not writable, too small)."""


def _read_lock(path: Path) -> dict | None:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) holds nothing
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def text_hash(text: str) -> int:
    """A text's 64-bit fingerprint (BLAKE2b-64 of its UTF-8), stored beside its vector (as its id is) so that
    vectors reused for a corpus can be checked against that corpus's texts, one document at a time."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def text_hashes(texts: Sequence[str]) -> np.ndarray:
    return np.fromiter((text_hash(text) for text in texts), dtype=np.uint64, count=len(texts))


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def fitted_name(part: int) -> str:
    return f"fitted-{part}.safetensors"


class OutputFolder:
    """An output folder: its manifest, its finished shards, and the checks before a run writes anything."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_NAME

    def read_manifest(self) -> dict | None:
        if not self.manifest_path.exists():
            return None
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise OutputFolderError(f"{self.manifest_path} is not a readable manifest ({error}); use --overwrite to start again") from None
        if not isinstance(manifest, dict) or manifest.get("layout") != LAYOUT_VERSION:
            raise OutputFolderError(f"{self.manifest_path} is not an embedlab shard manifest (layout {LAYOUT_VERSION})")
        return manifest

    def write_manifest(self, manifest: dict) -> None:
        atomic_write_bytes(self.manifest_path, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))

    def write_bytes(self, name: str, payload: bytes) -> None:
        atomic_write_bytes(self.path / name, payload)

    def write_shard(self, index: int, ids: Sequence[int | str], vectors: np.ndarray, texts: Sequence[str]) -> dict[str, object]:
        """Write shard ``index`` atomically (with each text's :func:`text_hash`); its manifest entry (file, rows, sha256)."""
        path = self.path / shard_name(index)
        payload = shard_bytes(ids, vectors, text_hashes=text_hashes(texts))
        atomic_write_bytes(path, [payload])
        return {"index": index, "file": path.name, "rows": len(ids), "sha256": hashlib.sha256(memoryview(payload)).hexdigest()}

    def intact(self, entry: dict) -> bool:
        """Whether a shard the manifest lists is on disk, in this folder, with its recorded checksum."""
        name, digest = entry.get("file"), entry.get("sha256")
        if not isinstance(name, str) or Path(name).name != name or not isinstance(digest, str):
            return False
        path = self.path / name
        return path.is_file() and file_sha256(path) == digest

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's writer lock (``.embedlab.lock``: the pid and host of the run) while the block runs.

        A second run into the same folder is refused while the first is alive; a lock whose process is
        gone (killed) is stale and taken over. Taken with O_EXCL, so two runs started at the same instant
        cannot both hold it."""
        path = self.path / LOCK_NAME
        me = {"pid": os.getpid(), "host": socket.gethostname()}
        for _ in range(3):
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = _read_lock(path)
                if holder is None:  # being written this instant, or unreadable: look again
                    time.sleep(0.05)
                    holder = _read_lock(path)
                if holder is not None and holder.get("host") not in (None, me["host"]):
                    raise OutputFolderError(
                        f"--out {self.path} is locked by an embed run on host {holder.get('host')} (pid {holder.get('pid')}); "
                        f"if no run is writing it, remove {path}") from None
                if holder is not None and holder.get("pid") is not None and _alive(holder.get("pid")):
                    raise OutputFolderError(
                        f"--out {self.path}: another embed run (pid {holder['pid']}) is writing this folder; wait for it "
                        f"to finish, or give another folder (remove {path} only if no such run exists)") from None
                path.unlink(missing_ok=True)  # stale: its writer is gone
                continue
            with os.fdopen(descriptor, "w") as file:
                file.write(json.dumps(me))
            break
        else:
            raise OutputFolderError(f"--out {self.path}: could not take the writer lock {path}")
        try:
            yield
        finally:
            holder = _read_lock(path)
            if holder is not None and holder.get("pid") == me["pid"]:
                path.unlink(missing_ok=True)

    def check_not_input(self, source: Path | None) -> None:
        """Refuse a folder that is the input file, or that holds it under a name a run writes (or
        ``--overwrite`` removes): the only copy of the corpus must never be replaced by its vectors."""
        if source is None:
            return
        source = Path(source).expanduser()
        if same_path(self.path, source):
            raise OutputFolderError(f"--out {self.path} is the input file; give another path (nothing was written)")
        if self.path.is_dir() and same_path(self.path, source.parent) and (
                source.name == MANIFEST_NAME or _RUN_FILE.fullmatch(source.name)):
            raise OutputFolderError(f"--out {self.path} is the input's folder and a run writes {source.name} there; "
                                    "give another folder or move the input (nothing was written)")

    def check_location(self) -> None:
        """Fail before any work if the folder cannot be made here: the path or a parent is a file, or the
        nearest existing folder takes no new file. Creates nothing."""
        if self.path.exists() and not self.path.is_dir():
            raise OutputFolderError(f"--out {self.path} exists and is not a folder")
        for parent in self.path.parents:
            if parent.exists() and not parent.is_dir():
                raise OutputFolderError(f"--out {self.path}: {parent} is a file, not a folder")
        existing = self._nearest_existing()
        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as error:
            raise OutputFolderError(f"--out {self.path}: {existing} is not writable ({error.strerror or error}); nothing was written") from None

    def prepare(self, expected: dict, overwrite: bool, *, check_only: bool = False) -> dict | None:
        """Check the folder can take a run described by ``expected``; the manifest to resume from, if any.

        Creates nothing. Refuses a path that is a file, a folder that holds anything but an
        embedlab run, and a run of different spec, method, code, shard size or input, unless
        ``overwrite`` (which removes only what an earlier run wrote: manifest, shards, fitted state).
        ``check_only``: refuse as above but remove nothing (the runner checks before it takes the lock,
        then prepares for real while holding it)."""
        self.check_location()
        manifest = self._readable_manifest(overwrite) if self.path.is_dir() else None
        if manifest is None and self.path.is_dir() and any(not entry.name.startswith(".") for entry in self.path.iterdir()):
            raise OutputFolderError(f"--out {self.path} is a folder that holds other files and no {MANIFEST_NAME}; give a new or empty folder")
        if manifest is not None:
            differences = [difference(key, manifest.get(key), value) for key, value in expected.items()
                           if comparable(key, manifest.get(key)) != comparable(key, value)]
            if differences and not overwrite:
                raise OutputFolderError(
                    f"--out {self.path} holds another run ({'; '.join(differences)}); "
                    "give a new folder, or --overwrite to replace it"
                )
            if differences or overwrite:
                if not check_only:
                    self.remove_run()
                manifest = None
        return manifest

    def _readable_manifest(self, overwrite: bool) -> dict | None:
        """The manifest; with ``overwrite``, an unreadable one (empty, cut short) counts as a run to replace."""
        if overwrite and self.manifest_path.is_file():
            try:
                json.loads(self.manifest_path.read_bytes().decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                return {}  # empty or cut short; a readable manifest of another kind is still refused below
        return self.read_manifest()

    def remove_run(self) -> None:
        """Delete what a run wrote here: the shards and fitted state its manifest lists, and the manifest.
        Without a readable manifest, only files named as a run names them (``shard-00000.parquet``,
        ``fitted-0.safetensors``); a user's own file (``shard-final-report.parquet``) is never touched."""
        manifest = self._readable_manifest(overwrite=True) or {}
        listed = [entry.get("file") for key in ("shards", "fitted") for entry in manifest.get(key) or () if isinstance(entry, dict)]
        names = ({name for name in listed if isinstance(name, str) and Path(name).name == name and name not in (".", "..")}
                 if manifest else {path.name for path in self.path.iterdir() if _SHARD_OR_FITTED.fullmatch(path.name)})
        for name in names:
            (self.path / name).unlink(missing_ok=True)
        self.manifest_path.unlink(missing_ok=True)

    def create(self) -> None:
        """Make the folder (after every check passed) and remove the temporaries a killed run left."""
        self.path.mkdir(parents=True, exist_ok=True)
        remove_orphan_temporaries(self.path)

    def _nearest_existing(self) -> Path:
        return next(folder for folder in (self.path, *self.path.parents) if folder.exists())

    def check_free_space(self, rows: int, dimension: int) -> int:
        """Fail now, not at shard 900, when the disk cannot hold ``rows`` more vectors; the estimate in bytes."""
        needed = int(rows * (dimension * 4 + _ROW_OVERHEAD_BYTES) * _DISK_MARGIN)
        free = shutil.disk_usage(self._nearest_existing()).free
        if needed > free:
            raise OutputFolderError(
                f"--out {self.path}: the shards need about {needed / 1e6:,.1f} MB ({rows:,} vectors of {dimension} float32) "
                f"and the disk has {free / 1e6:,.1f} MB free; nothing was written"
            )
        return needed


def _entry_path(output: OutputFolder, entry: dict) -> Path:
    """The shard file a manifest entry names, which must be a plain file name inside the folder."""
    name = entry.get("file")
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise InputError(f"{output.manifest_path}: shard {entry.get('index')}'s entry names a file outside the folder ({str(name)[:80]!r}); "
                         "the manifest is not this folder's")
    return output.path / name


def read_shards(folder: str | Path, *, partial: bool = False) -> tuple:
    """All ids and vectors of a finished output folder, in input order: ``(ids, vectors)``.

    The folder must vouch for every row: the manifest says the run is complete, lists each shard
    0 … n−1 once with the rows its position implies (the shard size; the last one the rest) and a
    sha256, and every shard file lies in the folder, matches its checksum and holds that many rows.
    Anything else is refused with the reason, so row *i* is always text *i*. ``partial=True`` reads a
    folder that is still being written (or was stopped): ``(ids, vectors, mask)`` with one row per input
    text, the unfinished rows zero (id ``None``) and ``mask`` True where a row is finished.
    The matrix is C-contiguous (FAISS-ready), float32, or int8/uint8 where the spec's ``precision=`` says."""
    output, manifest, (texts, shard_size, dimension), expected_rows, listed = _checked_layout(folder)
    count = len(expected_rows)
    missing = [index for index in range(count) if index not in listed]
    done = sum(expected_rows[index] for index in listed)
    if (missing or not manifest.get("complete")) and not partial:
        first = f"; shard {missing[0]} is missing" if missing else ""
        raise InputError(f"{output.path} is not complete: {done} of {texts} texts are finished{first} "
                         "(rerun embed to finish it, or read_shards(..., partial=True) for the finished rows with a mask)")
    dtype = VECTOR_DTYPES.get(manifest.get("precision", "float32"), np.float32)
    vectors = np.zeros((texts, dimension), dtype) if partial else None
    mask = np.zeros(texts, dtype=bool)
    ids: list[int | str | None] = [None] * texts if partial else []
    blocks = []
    for index in sorted(listed):
        shard_ids, shard_vectors = _checked_shard(output, listed[index], dimension)
        start = index * shard_size
        if partial:
            ids[start:start + len(shard_ids)] = shard_ids
            vectors[start:start + len(shard_ids)] = shard_vectors
            mask[start:start + len(shard_ids)] = True
        else:
            ids += shard_ids
            blocks.append(shard_vectors)
    if partial:
        return ids, vectors, mask
    return ids, np.ascontiguousarray(np.vstack(blocks) if blocks else np.zeros((0, dimension), dtype), dtype=dtype)


def _checked_layout(folder: str | Path) -> tuple[OutputFolder, dict, tuple[int, int, int], dict[int, int], dict[int, dict]]:
    """An output folder, its manifest, (texts, shard size, dimension), each shard's rows the manifest implies and the
    shards it lists, checked against each other (:func:`_listed_shards`)."""
    output = OutputFolder(folder)
    manifest = output.read_manifest()
    if manifest is None:
        raise FileNotFoundError(f"{output.manifest_path} not found: {output.path} is not an embedlab output folder")
    texts, shard_size, dimension, entries = _manifest_layout(output, manifest)
    count = -(-texts // shard_size) if shard_size > 0 else 0
    expected_rows = {index: min(shard_size, texts - index * shard_size) for index in range(count)}
    return output, manifest, (texts, shard_size, dimension), expected_rows, _listed_shards(output, entries, expected_rows)


def _manifest_layout(output: OutputFolder, manifest: dict) -> tuple[int, int, int, list]:
    """(texts, shard size, dimension, shard entries) of a manifest; a manifest lacking one is refused."""
    try:
        texts, shard_size, dimension = int(manifest["texts"]), int(manifest["shard_size"]), int(manifest["dimension"])
        entries = list(manifest["shards"])
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{output.manifest_path} lacks {error} (texts, shard_size, dimension, shards): not a readable manifest") from None
    return texts, shard_size, dimension, entries


def _listed_shards(output: OutputFolder, entries: list, expected_rows: dict[int, int]) -> dict[int, dict]:
    """The manifest's shard entries by index, each checked: an index in range, listed once, with the rows
    its position implies, a sha256, and a file name inside the folder."""
    count = len(expected_rows)
    listed: dict[int, dict] = {}
    for entry in entries:
        index = entry.get("index") if isinstance(entry, dict) else None
        if index not in expected_rows:
            raise InputError(f"{output.manifest_path}: a shard entry has index {str(index)[:40]}, outside 0…{count - 1}")
        if index in listed:
            raise InputError(f"{output.manifest_path}: shard {index} is listed twice")
        if entry.get("rows") != expected_rows[index]:
            raise InputError(f"{output.manifest_path}: shard {index} lists {str(entry.get('rows'))[:20]} rows, expected {expected_rows[index]}")
        if not isinstance(entry.get("sha256"), str):
            raise InputError(f"{output.manifest_path}: shard {index}'s manifest entry has no sha256; it cannot be checked "
                             "(rerun embed to rewrite the folder)")
        _entry_path(output, entry)
        listed[index] = entry
    return listed


def _checked_shard(output: OutputFolder, entry: dict, dimension: int) -> tuple[list, np.ndarray]:
    """A listed shard's ids and vectors, after checking its file against the manifest's checksum and rows."""
    path = _entry_path(output, entry)
    if not path.is_file() or file_sha256(path) != entry["sha256"]:
        raise InputError(f"{path} is missing or does not match its manifest checksum; rerun embed to rewrite it")
    shard_ids, shard_vectors = read_shard(path)
    if len(shard_ids) != entry["rows"] or shard_vectors.shape != (entry["rows"], dimension):
        raise InputError(f"{path} holds {len(shard_ids)} rows; its manifest entry lists {entry['rows']} "
                         f"(of dimension {dimension}): the manifest is not this folder's")
    return shard_ids, shard_vectors


def read_shard_text_hashes(folder: str | Path) -> np.ndarray | None:
    """Every row's :func:`text_hash` of a complete output folder, in input order (uint64); None when a shard
    was written by an embedlab that stored no hashes. Each shard is checked as :func:`read_shards` checks it."""
    output, _, _, expected_rows, listed = _checked_layout(folder)
    count = len(expected_rows)
    blocks = []
    for index in range(count):
        path = _entry_path(output, listed[index]) if index in listed else None
        if path is None or not path.is_file() or file_sha256(path) != listed[index]["sha256"]:
            raise InputError(f"{output.path}: shard {index} is missing or does not match its manifest checksum; rerun embed")
        hashes = read_text_hashes(path)
        if hashes is None:
            return None
        blocks.append(hashes)
    return np.concatenate(blocks) if blocks else np.zeros(0, np.uint64)
