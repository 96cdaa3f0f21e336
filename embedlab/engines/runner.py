"""``embed_corpus``: a corpus file → a folder of shards, on this process or on Ray, resumable.

One run, whatever the engine:

1. read the whole input once (:meth:`Corpus.scan`): bad input fails here, before anything is written;
2. check the output folder: another run's folder is refused (or replaced with ``overwrite``), an
   unwritable folder or a disk too small for the remaining shards fails here, nothing half-written;
3. fit target-fitted statistics once on the whole corpus and store them beside the shards (a resumed run
   reads them back instead of fitting again);
4. encode the shards not yet finished; each is written atomically and only then listed in the manifest,
   so a run killed at any point continues at the first unfinished shard and recomputes nothing finished.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.data.corpus import Corpus, CorpusScan
from embedlab.engines.fitting import load_vector_method
from embedlab.engines.output_precision import OutputEncoding
from embedlab.engines.plan import ShardPlan, read_plan, shard_plans, slice_rows
from embedlab.engines.shards import DEFAULT_SHARD_SIZE, ENGINES, LAYOUT_VERSION, OutputFolder, fitted_name
from embedlab.errors import InputError
from embedlab.methods.base import VectorMethod
from embedlab.runtime.cache.hashing import file_sha256
from embedlab.runtime.memory import keep_large_allocations_apart, release_free_memory
from embedlab.runtime.progress import ProgressBar, progress_bar
from embedlab.runtime.settings import token_states_uncached
from embedlab.version import code_version


@dataclass(frozen=True)
class EmbedResult:
    """What a run did: the folder, how many texts it holds, and how many shards were written now or reused;
    ``precision`` and ``width``: how a stored row is typed and how wide it is (48 uint8 bytes for 384-d ubinary)."""

    folder: Path
    texts: int
    dimension: int
    shards_written: int
    shards_reused: int
    precision: str = "float32"
    width: int = 0


def _float_rows(method: VectorMethod, texts: list[str], batch_size: int, normalize: bool) -> np.ndarray:
    """float32 rows of ``texts`` (cut to the spec's ``truncate_dim``): the runner quantises whole shards."""
    return method.encode(texts, batch_size=batch_size, show_progress_bar=False, normalize_embeddings=normalize, precision="float32")


def _text_blocks(corpus: Corpus, rows: int) -> Iterator[list[str]]:
    """The input's texts in blocks of ``rows``, streamed."""
    block: list[str] = []
    for record in corpus.records():
        block.append(record.text)
        if len(block) == rows:
            yield block
            block = []
    if block:
        yield block


def _local_shards(method: VectorMethod, corpus: Corpus, plans: list[ShardPlan], batch_size: int, normalize: bool,
                  bar: ProgressBar, total: int) -> Iterator[tuple[ShardPlan, list[int | str], np.ndarray]]:
    rows = slice_rows(total)  # from the whole corpus, not what is left: a resumed run encodes the same slices
    for plan in plans:
        ids, texts = read_plan(corpus, plan)
        blocks = []
        for start in range(0, len(texts), rows):
            chunk = texts[start:start + rows]
            with token_states_uncached():  # the shards are the result: no token states kept for a rerun
                blocks.append(_float_rows(method, chunk, batch_size, normalize))
            release_free_memory()  # resident memory stays flat however long the corpus (see the function)
            bar.update(len(chunk))
        yield plan, ids, np.vstack(blocks)


def embed_corpus(
    spec: str,
    input_path: str | Path,
    out: str | Path,
    *,
    engine: str = "local",
    input_format: str = "auto",
    shard_size: int = DEFAULT_SHARD_SIZE,
    batch_size: int = 32,
    normalize: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    address: str | None = None,
    workers: int | None = None,
) -> EmbedResult:
    """Embed every text of ``input_path`` with ``spec`` into the shard folder ``out`` (see the module docstring).

    ``engine="ray"`` encodes on Ray (``address`` or ``$RAY_ADDRESS`` attaches to a cluster, otherwise a
    local Ray is started with ``workers`` CPUs); the folder is the same either way, and either engine
    resumes the other's run. Read the result with :func:`embedlab.engines.read_shards`."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    if shard_size < 1 or batch_size < 1:
        raise InputError("shard size and batch size must be positive integers")
    keep_large_allocations_apart()  # resident memory independent of the corpus's length
    corpus = Corpus(input_path, input_format)
    identity = corpus.identity()
    folder = OutputFolder(out)
    folder.check_not_input(None if corpus.stdin else corpus.path)
    folder.check_location()
    method = load_vector_method(spec)
    output = OutputEncoding.of(method)
    expected = {
        "layout": LAYOUT_VERSION, "spec": method.spec, "method_fingerprint": method.fingerprint, "code_version": code_version(),
        "shard_size": shard_size, "normalize": normalize, "input": identity, "dimension": output.stored_width, **output.manifest_keys(),
    }
    scan = corpus.scan(shard_size)
    if scan.count == 0:
        raise InputError(f"input {corpus.source} holds no texts; nothing was written")
    folder.prepare(expected, overwrite, check_only=True)  # refuse another run's folder before writing anything
    plans = shard_plans(scan, shard_size)
    if not folder.path.exists():  # a new folder: the whole run must fit (a resumed one is checked under the lock)
        folder.check_free_space(scan.count, method.dimension)
    folder.create()
    with folder.lock():  # one writer per folder: a second run is refused while this one is alive
        return _embed_locked(method, output, corpus, folder, expected, scan, plans, overwrite, engine, batch_size, normalize,
                             progress, address, workers)


def _embed_locked(method: VectorMethod, output: OutputEncoding, corpus: Corpus, folder: OutputFolder, expected: dict, scan: CorpusScan,
                  plans: list[ShardPlan], overwrite: bool, engine: str, batch_size: int, normalize: bool,
                  progress: bool | None, address: str | None, workers: int | None) -> EmbedResult:
    """The run proper, while holding the folder's lock: the folder is prepared again (another run may have
    written it between the first check and the lock), then fitted and encoded."""
    manifest = folder.prepare(expected, overwrite) or {**expected, "texts": scan.count, "ids": scan.id_kind, "fitted": [], "shards": [], "complete": False}
    finished = {entry["index"]: entry for entry in manifest["shards"]
                if isinstance(entry, dict) and entry.get("index") in range(len(plans))
                and entry.get("rows") == plans[entry["index"]].rows and folder.intact(entry)}
    manifest["shards"] = sorted(finished.values(), key=lambda entry: entry["index"])
    todo = [plan for plan in plans if plan.index not in finished]
    folder.check_free_space(sum(plan.rows for plan in todo), method.dimension)
    folder.write_manifest(manifest)  # from here on the folder is this run's, even if killed while fitting
    with token_states_uncached():  # as for the shards: a fit pass is not worth caching token states for
        states = _fitted_states(method, corpus, folder, manifest, batch_size)
        output.fit(manifest, (_float_rows(method, texts, batch_size, normalize) for texts in _text_blocks(corpus, slice_rows(scan.count))))
    folder.write_manifest(manifest)
    done = sum(entry["rows"] for entry in finished.values())
    # texts done, texts/s and ETA on stderr; silent when ``progress`` is False, or None and no one watches
    with progress_bar(total=scan.count, initial=done, unit="text", desc="embed", show=progress,
                      dynamic_ncols=True, smoothing=0.1) as bar:
        if engine == "ray":
            from embedlab.engines.ray_engine import ray_shards

            shards = ray_shards(method, states, corpus, todo, batch_size, normalize, bar, address, workers, scan.count)
        else:
            shards = _local_shards(method, corpus, todo, batch_size, normalize, bar, scan.count)
        with contextlib.closing(shards):  # a failed write still shuts down a Ray this run started
            _write_shards(folder, corpus, manifest, shards, output)
    manifest["complete"] = len(manifest["shards"]) == len(plans)
    folder.write_manifest(manifest)
    return EmbedResult(folder.path, scan.count, method.dimension, len(todo), len(finished), output.precision, output.stored_width)


def _write_shards(folder: OutputFolder, corpus: Corpus, manifest: dict, shards: Iterator[tuple[ShardPlan, list[int | str], np.ndarray]],
                  output: OutputEncoding) -> None:
    """Write each encoded shard atomically in the spec's precision, with its texts' hashes (read again from
    the input here, whichever engine encoded it), then list it in the manifest (only then is it finished)."""
    for plan, ids, vectors in shards:
        if vectors.shape != (plan.rows, output.cut_width):
            raise ValueError(f"{output.spec}: shard {plan.index} came back with shape {vectors.shape}, expected {(plan.rows, output.cut_width)}")
        read_ids, texts = read_plan(corpus, plan)
        if read_ids != list(ids):
            raise ValueError(f"{output.spec}: shard {plan.index} came back with other ids than the input's")
        manifest["shards"].append(folder.write_shard(plan.index, ids, output.encode(vectors), texts))
        manifest["shards"].sort(key=lambda entry: entry["index"])
        folder.write_manifest(manifest)


def _fitted_states(method: VectorMethod, corpus: Corpus, folder: OutputFolder, manifest: dict, batch_size: int) -> list[bytes]:
    """The fitted state of each fittable part: read back from the folder when an earlier run stored it
    (checked against its sha256), else fitted now (on the whole corpus when the spec needs it) and stored."""
    if not method.fittable:
        return []
    if manifest["fitted"]:
        states = []
        for entry in manifest["fitted"]:
            path = folder.path / entry["file"]
            if not path.is_file() or file_sha256(path) != entry["sha256"]:
                raise InputError(f"{path} is missing or damaged; rerun with --overwrite to fit and embed again")
            states.append(path.read_bytes())
        method.restore(states)
        return states
    records = corpus.records()
    texts = [record.text for record in records] if method.fits_on_target else [next(records).text]
    states = method.fit_for_corpus(texts, batch_size)
    for part, state in enumerate(states):
        folder.write_bytes(fitted_name(part), state)
        manifest["fitted"].append({"file": fitted_name(part), "sha256": hashlib.sha256(state).hexdigest()})
    manifest["fitted_fingerprint"] = method.fingerprint
    return states
