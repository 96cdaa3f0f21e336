"""What computing a method's vectors cost on this machine, stored beside the quality of every record.

The scorer (:mod:`embedlab.evaluation.scoring`) measures each ``encode`` (or a pairwise method's
``similarity_pairs``) it actually runs with :func:`measured`: wall seconds, CPU seconds of the whole process
(every thread torch or BLAS runs), and the peak of the process's resident memory above its level just before
the call, read by a sampler thread from ``/proc/self/statm`` during the call (``ru_maxrss`` is the whole
process's high-water mark since it started, so it cannot give one method's figure). The evaluation cache keeps
each measurement beside the vectors it measured, so encodings read back from the cache report the cost of
the run that computed them, never the near-zero time of reading a file; vectors cached before costs were
recorded give no time, with a note.

Texts whose token states the model's token-state cache already held (an earlier run of another spec of
the same model) did not run through the transformer: the token-state store counts them
(:mod:`embedlab.runtime.reuse`), and figures that include such texts are marked ``partial`` with a note.

The harness collects one task run's measurements with :func:`collecting` and stores :meth:`CostTally.cost`
with every record: a dict of exactly :data:`COST_KEYS`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from embedlab.runtime.machine import cpu_model
from embedlab.runtime.memory import resident_bytes
from embedlab.runtime.reuse import counting_reuse, current_reuse

T = TypeVar("T")

COST_KEYS = ("encode_seconds", "cpu_seconds", "texts", "texts_per_second", "peak_memory_mb", "bytes_per_vector",
             "parameters", "cpu_model", "threads", "partial", "note")
CACHED_NOTE = "encodings read from the evaluation cache, computed before costs were recorded: no time measured"
SAMPLE_SECONDS = 0.005  # the RSS sampler's period: short encodes (a few ms) still get several samples


@dataclass(frozen=True)
class CallCost:
    """The cost of one encode (or pair-scoring) call: None where it was not measured (read from an old cache)."""

    texts: int
    seconds: float | None = None
    cpu_seconds: float | None = None
    peak_memory_mb: float | None = None
    bytes_per_vector: int | None = None  # None: no vectors (pairwise), or an encode in another precision than the method's
    cpu_model: str | None = None
    threads: int | None = None
    reused_texts: int = 0  # texts whose token states a cache served (not computed earlier in the run): the transformer did not run

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> CallCost:
        return cls(**{key: stored.get(key) for key in cls.__dataclass_fields__})


def thread_count() -> int:
    """The threads the encode may use: torch's intra-op threads once torch is loaded, else the usable cores."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class _PeakSampler:
    """A thread that reads the process's RSS every :data:`SAMPLE_SECONDS` until stopped and keeps the peak."""

    def __init__(self) -> None:
        self.baseline = resident_bytes()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="embedlab-rss-sampler", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self._observe()

    def _observe(self) -> None:
        now = resident_bytes()
        if now is not None and (self.peak is None or now > self.peak):
            self.peak = now

    def __enter__(self) -> _PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._observe()  # the level at the end counts too (memory still held by the returned vectors)

    def above_baseline_mb(self) -> float | None:
        if self.baseline is None or self.peak is None:
            return None
        return max(0, self.peak - self.baseline) / 2**20


def measured(call: Callable[[], T], texts: int) -> tuple[T, CallCost]:
    """``call()``'s result and what it cost (wall and process CPU seconds, peak RSS above the level before);
    ``bytes_per_vector`` is left for the caller, who knows what the result holds."""
    reuse = current_reuse()  # opened by collecting(): texts served from the token-state cache during the call
    reused_before = reuse.texts if reuse is not None else 0
    with _PeakSampler() as sampler:
        wall, cpu = time.perf_counter(), time.process_time()
        result = call()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return result, CallCost(texts=texts, seconds=wall, cpu_seconds=cpu, peak_memory_mb=sampler.above_baseline_mb(),
                            cpu_model=cpu_model(), threads=thread_count(),
                            reused_texts=reuse.texts - reused_before if reuse is not None else 0)


def vector_bytes(vectors: Any) -> int | None:
    """Bytes of one vector as the method returned it: its width × its dtype's item size (1536 for 384
    float32, 48 for 384 bits packed by ``precision=ubinary``); None when it is not a 2-D array."""
    shape, dtype = getattr(vectors, "shape", None), getattr(vectors, "dtype", None)
    if shape is None or len(shape) != 2 or dtype is None:
        return None
    itemsize = getattr(dtype, "itemsize", None)
    return int(shape[1]) * int(itemsize) if itemsize is not None else None


class CostTally:
    """The calls one task run made for one method, summed into the cost stored with its records."""

    def __init__(self, method: object) -> None:
        self.method = method
        self.calls: list[CallCost] = []
        self.partial_notes: list[str] = []

    def add(self, call: CallCost) -> None:
        self.calls.append(call)

    def mark_partial(self, note: str) -> None:
        """Some of the method's vectors were computed elsewhere (read from shards, on Ray actors): the figures
        cover only the part computed here."""
        self.partial_notes.append(note)

    def cost(self) -> dict[str, Any] | None:
        """The summed cost (:data:`COST_KEYS`), or None when the run encoded nothing."""
        if not self.calls:
            return None
        notes = list(dict.fromkeys(self.partial_notes))
        elsewhere = getattr(self.method, "cost_partial_note", None)  # a method that encodes on other machines says so
        if elsewhere:
            notes.insert(0, elsewhere)
        timed = all(call.seconds is not None for call in self.calls)
        if not timed:
            notes.append(CACHED_NOTE)
        reused = sum(call.reused_texts or 0 for call in self.calls)
        if reused:  # the transformer ran for the other texts only: a lower bound of the method's cost
            notes.append(f"token states of {reused} of {sum(call.texts for call in self.calls)} texts read from the "
                         "token-state cache (an earlier run of this model): the transformer did not run for them, so the "
                         "figures understate the method's cost")
        texts = sum(call.texts for call in self.calls)
        seconds = sum(call.seconds for call in self.calls) if timed else None
        peaks = [call.peak_memory_mb for call in self.calls if call.peak_memory_mb is not None]
        first = next((call for call in self.calls if call.cpu_model is not None), None)
        return {
            "encode_seconds": seconds,
            "cpu_seconds": sum(call.cpu_seconds for call in self.calls) if timed else None,
            "texts": texts,
            "texts_per_second": texts / seconds if seconds else None,
            "peak_memory_mb": max(peaks) if timed and peaks else None,
            "bytes_per_vector": next((call.bytes_per_vector for call in self.calls if call.bytes_per_vector is not None), None),
            "parameters": getattr(self.method, "parameter_count", None),
            "cpu_model": first.cpu_model if first is not None else None,
            "threads": first.threads if first is not None else None,
            "partial": bool(elsewhere) or bool(self.partial_notes) or bool(reused),
            "note": "; ".join(notes) or None,
        }


def load_before_measuring(method: object) -> None:
    """Let ``method`` load its model before the first measured encode (asking its ``dimension`` loads it), so
    that every method's figures are encoding, not loading: the first of several specs over one model would
    otherwise pay the model's load for all of them. A method that encodes elsewhere (Ray actors) is left alone."""
    if not getattr(method, "cost_partial_note", None):
        getattr(method, "dimension", None)


_TALLY: ContextVar[CostTally | None] = ContextVar("embedlab_cost_tally", default=None)


@contextmanager
def collecting(method: object) -> Iterator[CostTally]:
    """Collect the cost of every encode the scorer runs for ``method`` in this thread (or asyncio task) until
    the block ends."""
    tally = CostTally(method)
    token = _TALLY.set(tally)
    try:
        with counting_reuse():  # one count for the whole run: a text it computed itself is never "reused"
            yield tally
    finally:
        _TALLY.reset(token)


def report(method: object, call: CallCost) -> None:
    """Add one call of ``method`` to the run being collected (nothing when none is, or when the call was of
    another method: a rerank's pairwise scoring is not the first stage's cost)."""
    tally = _TALLY.get()
    if tally is not None and tally.method is method:
        tally.add(call)


def report_partial(note: str) -> None:
    """Say that part of the current run's vectors were not computed here (:meth:`CostTally.mark_partial`)."""
    tally = _TALLY.get()
    if tally is not None:
        tally.mark_partial(note)
