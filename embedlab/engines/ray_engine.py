"""The Ray engine: encode texts on a pool of Ray actors, each of which loads the method once.

Ray Data pipeline of one ``embed`` run::

    one row per slice of an unfinished shard (the shard's start position in the input, the slice's rows)
      → map_batches(_Encoder, ActorPoolStrategy(size))  actors load the method (and fitted state) once,
                                                         then read each slice from the input and encode it
      → the driver gathers each shard's rows, checks every row came back exactly once, writes the shard

Reading happens in the actors (not in a separate Ray task stage): a task stage would start its own
worker processes, each importing torch to unpickle the reader, for reading that costs little.

The input file must be readable at the same path on every node (as for Ray's own ``read_*``), and the
same embedlab installed on every node. A dead actor is restarted by Ray and its batch retried; the
driver's per-shard check guarantees no text is lost or written twice whatever Ray does.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from embedlab.data.corpus import Corpus
from embedlab.engines.fitting import load_vector_method
from embedlab.engines.plan import slice_rows
from embedlab.methods.base import VectorMethod
from embedlab.runtime.memory import keep_large_allocations_apart, release_free_memory
from embedlab.runtime.progress import progress_bar
from embedlab.runtime.settings import cache_root, configure, data_root, ray_address, set_token_state_storing

def import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise ImportError("the Ray engine needs Ray Data: pip install 'embedlab[ray]' (ray[data]>=2.40)") from None
    return ray


@contextlib.contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[object]:
    """Ray, ready: the running session if there is one; else attach to ``address`` (or ``$RAY_ADDRESS``);
    else start a local Ray with ``workers`` CPUs (all of them by default), shut down on exit."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    address = address or ray_address()
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        # address="local": start our own, as promised; without it Ray attaches to the last cluster started on
        # this machine (/tmp/ray/ray_current_cluster), and refuses num_cpus there
        ray.init(address="local", num_cpus=workers or os.cpu_count(), include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()


class _Encoder:
    """A Ray actor: the method loaded once (with the driver's fitted state and cache/data roots).

    Each call gets one slice: either its texts (``text`` column: the evaluation harness's in-memory
    texts) or where to read them (``offset``/``line`` of the shard's start in the input, ``skip`` records
    into the shard, ``rows`` records), read here so that no text passes through the driver."""

    def __init__(self, spec: str, states: Sequence[bytes], batch_size: int, normalize: bool, cache_folder: str, data_folder: str,
                 path: str | None = None, input_format: str = "auto") -> None:
        configure(cache_root=cache_folder, data_root=data_folder)
        keep_large_allocations_apart()  # a long-lived actor: see the function
        if path:  # a corpus into shards: its token states are not kept (see settings.token_states_uncached)
            set_token_state_storing(False)
        self.method = load_vector_method(spec).restore(states)
        self.batch_size = batch_size
        self.normalize = normalize
        self.corpus = Corpus(path, input_format) if path else None
        # The loaded model, torch and transformers are millions of objects that live as long as the actor.
        # Moved out of the collector's reach, they are not traversed by later collections nor by the
        # interpreter's final one, which on a loaded machine kept a finished actor (and its CPU) for up to 30 s.
        gc.freeze()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if "text" in batch:
            shards, positions, ids, texts = batch["shard"], batch["position"], batch["id"], [str(text) for text in batch["text"]]
        else:
            shards, positions, ids, texts = self._read(batch)
        # float32 here whatever the spec's precision=: the caller quantises once, over all the rows (the ranges of int8)
        vectors = self.method.encode(texts, batch_size=self.batch_size, show_progress_bar=False, normalize_embeddings=self.normalize,
                                     precision="float32")
        release_free_memory()  # a long-lived actor: keep its resident memory flat (see the function)
        return {"shard": shards, "position": positions, "id": ids, "vector": vectors}

    def _read(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """The records of the slices in ``batch``, read from their shard's start position (records before
        the slice are decoded and skipped, which costs little next to encoding them)."""
        shards, positions, ids, texts = [], [], [], []
        for index, offset, line, skip, rows in zip(batch["shard"], batch["offset"], batch["line"], batch["skip"], batch["rows"]):
            records = itertools.islice(self.corpus.records((int(offset), int(line))), int(skip), int(skip) + int(rows))
            for position, record in enumerate(records, start=int(skip)):
                shards.append(index)
                positions.append(position)
                ids.append(record.id)
                texts.append(record.text)
        id_type = np.int64 if ids and isinstance(ids[0], int) else object
        return np.array(shards, dtype=np.int64), np.array(positions, dtype=np.int64), np.array(ids, dtype=id_type), texts


def actor_plan(uses_gpu: bool, cluster: Mapping[str, float], workers: int | None) -> tuple[int, dict[str, float]]:
    """The actor pool for a method (``uses_gpu``: its own answer, :attr:`EmbeddingMethod.uses_gpu`) on a
    cluster with ``cluster`` resources (``ray.cluster_resources()``): ``(actors, each actor's resource request)``.

    A GPU method's actors each ask for one GPU (``num_gpus=1``) when the cluster has any, one actor per
    GPU, so Ray places them one to a GPU across the nodes and a multi-GPU cluster scales the run; with
    ``workers`` set to more actors than GPUs they share them (``num_gpus`` = GPUs / actors). Other
    methods, and any method on a cluster without GPUs: one CPU per actor, one actor per CPU.
    """
    gpus = float(cluster.get("GPU", 0))
    if gpus > 0 and uses_gpu:
        size = workers or max(1, int(gpus))
        return size, {"num_cpus": 1, "num_gpus": min(1.0, gpus / size)}
    return workers or max(1, int(cluster.get("CPU", 1))), {"num_cpus": 1}


def _encode_dataset(dataset, method: VectorMethod, states: Sequence[bytes], batch_size: int, normalize: bool, rows: int, workers: int | None,
                    corpus: Corpus | None = None):
    """``dataset`` (one block per slice) mapped through a pool of :class:`_Encoder` actors (:func:`actor_plan`),
    one slice per call; a dead actor is restarted and its slice retried (Ray Data's default for actor pools)."""
    ray = import_ray()
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the driver shows one bar of texts
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    source = (str(corpus.path.resolve()), corpus.format) if corpus is not None else (None, "auto")
    size, resources = actor_plan(method.uses_gpu, ray.cluster_resources(), workers)
    return dataset.map_batches(
        _Encoder, batch_size=rows, **resources, compute=ray.data.ActorPoolStrategy(size=size),
        fn_constructor_args=(method.spec, list(states), batch_size, normalize, str(cache_root()), str(data_root()), *source),
    )


def _gather(batches, expected_rows: dict[int, int], bar) -> Iterator[tuple[int, list, np.ndarray]]:
    """Regroup the encoded rows by shard; yield each shard once all its rows are back, exactly once each."""
    pending: dict[int, list[dict[str, np.ndarray]]] = {}
    counts = dict.fromkeys(expected_rows, 0)
    for batch in batches:
        for shard in np.unique(batch["shard"]):
            mask = batch["shard"] == shard
            pending.setdefault(int(shard), []).append({key: value[mask] for key, value in batch.items()})
            counts[int(shard)] += int(mask.sum())
        bar.update(len(batch["shard"]))
        for shard in [shard for shard, count in counts.items() if count >= expected_rows[shard] and shard in pending]:
            parts = pending.pop(shard)
            positions = np.concatenate([part["position"] for part in parts])
            order = np.argsort(positions, kind="stable")
            if not np.array_equal(positions[order], np.arange(expected_rows[shard])):
                raise RuntimeError(f"Ray returned shard {shard} with rows missing or repeated; nothing of it was written")
            ids = np.concatenate([part["id"] for part in parts])[order].tolist()
            vectors = np.concatenate([np.asarray(part["vector"], dtype=np.float32) for part in parts])[order]
            del counts[shard]
            yield shard, ids, vectors
    if counts:
        raise RuntimeError(f"Ray finished without returning every text of shard(s) {sorted(counts)}; nothing of them was written")


def ray_shards(method: VectorMethod, states: Sequence[bytes], corpus: Corpus, plans: Sequence, batch_size: int, normalize: bool,
               bar, address: str | None, workers: int | None, total: int | None = None) -> Iterator[tuple[object, list, np.ndarray]]:
    """The runner's engine hook: ``(plan, ids, vectors)`` of each shard in ``plans``, encoded on Ray."""
    if not plans:
        return
    by_index = {plan.index: plan for plan in plans}
    with ray_session(address, workers) as ray:
        rows = slice_rows(total if total is not None else sum(plan.rows for plan in plans))  # the local engine's slices
        slices = [{"shard": plan.index, "offset": plan.start[0], "line": plan.start[1], "skip": skip, "rows": min(rows, plan.rows - skip)}
                  for plan in plans for skip in range(0, plan.rows, rows)]
        descriptors = ray.data.from_items(slices, override_num_blocks=len(slices))
        encoded = _encode_dataset(descriptors, method, states, batch_size, normalize, 1, workers, corpus)
        batches = encoded.iter_batches(batch_size=None, batch_format="numpy")
        for index, ids, vectors in _gather(batches, {plan.index: plan.rows for plan in plans}, bar):
            yield by_index[index], ids, vectors


class RayEncodedMethod(VectorMethod):
    """``method`` with its ``encode`` run on Ray actors (``eval --engine ray``): same spec, fingerprint and
    vectors, so evaluation caches and the results database cannot tell the engines apart.

    A spec that fits statistics on its target texts is encoded here, not on Ray: fitting it already
    computes every vector. Other attributes are the wrapped method's."""

    def __init__(self, method: VectorMethod, workers: int | None = None) -> None:
        super().__init__(method.parsed)
        self.method = method
        self.workers = workers

    def __getattr__(self, name: str) -> object:
        return getattr(self.method, name)

    # the cost records' partial mark (embedlab.evaluation.cost): the actors' CPU time and memory are not this process's
    cost_partial_note = "encoded on Ray actors: CPU seconds and peak memory are this process's share only"

    @property
    def fingerprint(self) -> str:
        return self.method.fingerprint

    @property
    def parameter_count(self) -> int | None:
        return self.method.parameter_count

    @property
    def dimension(self) -> int:
        return self.method.dimension

    @property
    def fits_on_target(self) -> bool:
        return self.method.fits_on_target

    @property
    def prompts(self) -> dict[str, str]:
        return self.method.prompts

    def _encode_prompted(self, texts: list[str], batch_size: int, show_progress_bar: bool | None, prompt: str) -> np.ndarray:
        # one side of an asymmetric search: encoded here, as a target-fitted spec is
        return self.method.encode(texts, prompt=prompt, batch_size=batch_size, show_progress_bar=show_progress_bar)

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        if self.method.fits_on_target:
            return self.method.encode(texts, batch_size=batch_size, show_progress_bar=show_progress_bar)
        states = load_vector_method(self.spec).fit_for_corpus(texts, batch_size)
        with ray_session(workers=self.workers) as ray:
            rows = slice_rows(len(texts))
            dataset = ray.data.from_items([{"shard": 0, "position": row, "id": row, "text": text} for row, text in enumerate(texts)],
                                          override_num_blocks=math.ceil(len(texts) / rows))
            encoded = _encode_dataset(dataset, self.method, states, batch_size, False, rows, self.workers)
            with progress_bar(total=len(texts), unit="text", desc="encode (ray)", disable=not show_progress_bar) as bar:
                ((_, _, vectors),) = list(_gather(encoded.iter_batches(batch_size=None, batch_format="numpy"), {0: len(texts)}, bar))
        return vectors
