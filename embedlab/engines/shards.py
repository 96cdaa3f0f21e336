"""The output folder of ``embedlab embed … --out FOLDER``: Parquet shards plus a ``manifest.json``.

Layout (one format, whatever the engine)::

    FOLDER/manifest.json        what was asked (spec, method fingerprint, code version, shard size, input
                                identity) and what is finished (each shard's rows and sha256)
    FOLDER/fitted-0.safetensors statistics fitted on the whole corpus (target-fitted specs only)
    FOLDER/shard-00000.parquet  columns ``id`` (int64 or string) and ``vector`` (fixed-size list of float32)
    FOLDER/shard-00001.parquet  …

Why this shape: every shard and every manifest version is written with
:func:`embedlab.runtime.atomic_write_bytes`, and a shard enters the manifest only after it is on disk, so
a run killed at any instant (``kill -9`` included) leaves only whole shards that the manifest vouches for;
the next run checks them (size and sha256) and starts at the first shard not listed. Parquet keeps the
ids beside the vectors in one file, so a shard can never be half of a pair of files; :func:`read_shards`
returns the vectors as one float32, C-contiguous matrix (what FAISS's ``index.add`` takes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embedlab import runtime

MANIFEST_NAME = "manifest.json"
LAYOUT_VERSION = 1
# bytes a shard row costs beyond its vector (parquet framing, the id), and a margin on the whole estimate
_ROW_OVERHEAD_BYTES = 32
_DISK_MARGIN = 1.1


_RUN_FILE = re.compile(r"(shard-\d+\.parquet|fitted-\d+\.safetensors|\..*\.tmp)")


def same_path(first: Path, second: Path) -> bool:
    """Whether two paths name one file or folder (however spelled: ``.``, symlinks, hard links)."""
    try:
        if first.exists() and second.exists():
            return os.path.samefile(first, second)
    except OSError:
        pass
    return first.resolve() == second.resolve()


class OutputFolderError(ValueError):
    """An output folder that cannot take this run (another run's folder, not a folder, not writable, too small)."""


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def fitted_name(part: int) -> str:
    return f"fitted-{part}.safetensors"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def shard_bytes(ids: Sequence[int | str], vectors: np.ndarray, texts: Sequence[str] | None = None) -> object:
    """Parquet bytes (a pyarrow buffer): ``id``, ``vector`` (fixed-size list of float32), optional ``text``.

    The one Parquet layout of embedlab's vectors: a shard, and ``embed --output FILE.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    id_type = pa.int64() if ids and isinstance(ids[0], int) else pa.string()
    columns = {
        "id": pa.array(list(ids), type=id_type),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), type=pa.float32()), vectors.shape[1]),
    }
    if texts is not None:
        columns["text"] = pa.array(list(texts), type=pa.string())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def read_shard(path: Path) -> tuple[list[int | str], np.ndarray]:
    """``(ids, vectors)`` of one shard; the vectors float32 and C-contiguous."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    column = table.column("vector").combine_chunks()
    width = column.type.list_size
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return table.column("id").to_pylist(), np.ascontiguousarray(flat.reshape(-1, width), dtype=np.float32)


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
        runtime.atomic_write_bytes(self.manifest_path, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))

    def write_bytes(self, name: str, payload: bytes) -> None:
        runtime.atomic_write_bytes(self.path / name, payload)

    def write_shard(self, index: int, ids: Sequence[int | str], vectors: np.ndarray) -> dict[str, object]:
        """Write shard ``index`` atomically; its manifest entry (file, rows, sha256)."""
        path = self.path / shard_name(index)
        payload = shard_bytes(ids, vectors)
        runtime.atomic_write_bytes(path, [payload])
        return {"index": index, "file": path.name, "rows": len(ids), "sha256": hashlib.sha256(memoryview(payload)).hexdigest()}

    def intact(self, entry: dict) -> bool:
        """Whether a shard the manifest lists is on disk with its recorded checksum."""
        path = self.path / entry["file"]
        return path.is_file() and sha256_file(path) == entry["sha256"]

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

    def prepare(self, expected: dict, overwrite: bool) -> dict | None:
        """Check the folder can take a run described by ``expected``; the manifest to resume from, if any.

        Creates nothing. Refuses a path that is a file, a folder that holds anything but an
        embedlab run, and a run of different spec, method, code, shard size or input, unless
        ``overwrite`` (which removes only what an earlier run wrote: manifest, shards, fitted state)."""
        self.check_location()
        manifest = self.read_manifest() if self.path.is_dir() else None
        if manifest is None and self.path.is_dir() and any(not entry.name.startswith(".") for entry in self.path.iterdir()):
            raise OutputFolderError(f"--out {self.path} is a folder that holds other files and no {MANIFEST_NAME}; give a new or empty folder")
        if manifest is not None:
            differences = [f"{key}: {manifest.get(key)!r} there, {value!r} now" for key, value in expected.items() if manifest.get(key) != value]
            if differences and not overwrite:
                raise OutputFolderError(
                    f"--out {self.path} holds another run ({'; '.join(differences)}); "
                    "give a new folder, or --overwrite to replace it"
                )
            if differences or overwrite:
                self.remove_run()
                manifest = None
        return manifest

    def remove_run(self) -> None:
        """Delete what a run wrote here (its listed shards, any shard file, fitted state, the manifest)."""
        for path in [*self.path.glob("shard-*.parquet"), *self.path.glob("fitted-*.safetensors")]:
            path.unlink(missing_ok=True)
        self.manifest_path.unlink()

    def create(self) -> None:
        """Make the folder (after every check passed) and remove the temporaries a killed run left."""
        self.path.mkdir(parents=True, exist_ok=True)
        runtime.remove_orphan_temporaries(self.path)

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


def read_shards(folder: str | Path) -> tuple[list[int | str], np.ndarray]:
    """All ids and vectors of a finished (or partly finished) output folder, in input order.

    Checks every shard against its manifest checksum, so a damaged or foreign file is never read as
    vectors. The matrix is float32 and C-contiguous (FAISS-ready)."""
    output = OutputFolder(folder)
    manifest = output.read_manifest()
    if manifest is None:
        raise FileNotFoundError(f"{output.manifest_path} not found: {output.path} is not an embedlab output folder")
    ids: list[int | str] = []
    blocks = []
    for entry in sorted(manifest["shards"], key=lambda entry: entry["index"]):
        if not output.intact(entry):
            raise ValueError(f"{output.path / entry['file']} is missing or does not match its manifest checksum; rerun embed to rewrite it")
        shard_ids, vectors = read_shard(output.path / entry["file"])
        ids += shard_ids
        blocks.append(vectors)
    dimension = int(manifest["dimension"])
    return ids, np.ascontiguousarray(np.vstack(blocks) if blocks else np.zeros((0, dimension), np.float32), dtype=np.float32)
