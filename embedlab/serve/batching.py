"""Dynamic batching: concurrent requests for one method coalesced into one ``encode`` call.

Each served method has one :class:`Batcher`: a queue of waiting requests and one thread that runs the
model (a method is not safe to call from two threads at once, and the event loop must stay free to
accept and answer requests while it runs). While that thread encodes one batch, new requests queue up;
when it is free, everything waiting goes into the next call, up to ``max_batch_tokens`` tokens (a single
larger request goes alone). An idle thread waits at most ``max_wait_s`` after the first request for
others to join it. A full queue is refused (:class:`QueueFull`, answered 503 with ``Retry-After``)
rather than grown without bound. A request whose client went away is cancelled: if its batch has not
started, its texts are dropped from it; either way the other requests of its batch get their answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from typing import TypeVar

import numpy as np

from embedlab.runtime.settings import token_states_uncached
from embedlab.serve.metrics import ServerMetrics
from embedlab.serve.served import ServedMethod

Result = TypeVar("Result")


class QueueFull(Exception):
    """The method's queue holds ``max_queue`` requests already."""


@dataclass(eq=False)
class Job:
    """One request's texts waiting for a batch, and the future its answer goes to."""

    texts: list[str]
    tokens: int
    truncate_dim: int | None
    future: asyncio.Future
    enqueued: float = field(default_factory=time.monotonic)


class Batcher:
    """The queue and the model thread of one served method (see the module docstring)."""

    def __init__(self, served: ServedMethod, metrics: ServerMetrics, *, max_batch_tokens: int, max_wait_s: float,
                 max_queue: int, batch_size: int) -> None:
        self.served = served
        self.metrics = metrics
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.batch_size = batch_size
        self._queue: deque[Job] = deque()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"embedlab-serve-{served.spec[:40]}")
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    # -- life cycle (the app's lifespan) -------------------------------------------------------------
    def start(self) -> None:
        self._arrived = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"batcher {self.served.spec}")

    async def stop(self) -> None:
        """Stop taking batches and let the model thread finish what it runs (after the server drained)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for job in self._queue:
            job.future.cancel()
        self._executor.shutdown(wait=True)

    # -- what requests call ------------------------------------------------------------------------
    async def encode(self, texts: list[str], tokens: int, truncate_dim: int | None = None) -> np.ndarray:
        """The vectors of ``texts`` (float32 rows), from whichever batch they join."""
        if len(self._queue) >= self.max_queue:
            self.metrics.rejected.labels(self.served.spec).inc()
            raise QueueFull(f"{self.served.spec}: {len(self._queue)} requests are waiting already")
        job = Job(texts, tokens, truncate_dim, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        self._set_depth()
        self._arrived.set()
        return await job.future

    async def run_on_model_thread(self, function: Callable[..., Result], *args: object) -> Result:
        """``function(*args)`` on the model's thread, between batches (pairwise scoring, which has no vectors)."""
        started = time.perf_counter()
        result = await asyncio.get_running_loop().run_in_executor(self._executor, _uncached, function, *args)
        self.metrics.encode_seconds.labels(self.served.spec).observe(time.perf_counter() - started)
        return result

    # -- the batching loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._queue:
                await self._gather()
                batch = self._take()
                if batch:
                    await self._encode_batch(batch)

    async def _gather(self) -> None:
        """Wait, at most ``max_wait_s`` after the oldest waiting request, for more requests to join it."""
        deadline = self._queue[0].enqueued + self.max_wait_s
        while sum(job.tokens for job in self._queue) < self.max_batch_tokens:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    def _take(self) -> list[Job]:
        """The waiting requests that fit the token budget (at least one), oldest first; cancelled ones dropped."""
        batch: list[Job] = []
        tokens = 0
        while self._queue:
            job = self._queue[0]
            if job.future.done():  # its client went away
                self._queue.popleft()
                continue
            if batch and tokens + job.tokens > self.max_batch_tokens:
                break
            batch.append(self._queue.popleft())
            tokens += job.tokens
        self._set_depth()
        return batch

    async def _encode_batch(self, batch: list[Job]) -> None:
        """One encode call per ``truncate_dim`` asked for in the batch; each job gets its rows or the error."""
        now = time.monotonic()
        labels = self.served.spec
        for job in batch:
            self.metrics.queue_wait.labels(labels).observe(now - job.enqueued)
        self.metrics.batch_requests.labels(labels).observe(len(batch))
        ordered = sorted(batch, key=lambda job: -1 if job.truncate_dim is None else job.truncate_dim)
        for truncate_dim, group in groupby(ordered, key=lambda job: job.truncate_dim):
            jobs = list(group)
            texts = [text for job in jobs for text in job.texts]
            self.metrics.batch_texts.labels(labels).observe(len(texts))
            self.metrics.batch_tokens.labels(labels).observe(sum(job.tokens for job in jobs))
            started = time.perf_counter()
            try:
                vectors = await asyncio.get_running_loop().run_in_executor(self._executor, self._encode, texts, truncate_dim)
            except Exception as error:  # noqa: BLE001 - the error belongs to these requests, not to the server
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            self.metrics.encode_seconds.labels(labels).observe(time.perf_counter() - started)
            start = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(vectors[start:start + len(job.texts)])
                start += len(job.texts)

    def _encode(self, texts: list[str], truncate_dim: int | None) -> np.ndarray:
        return _uncached(self.served.method.encode, texts, batch_size=self.batch_size, show_progress_bar=False,
                         truncate_dim=truncate_dim)

    def _set_depth(self) -> None:
        self.metrics.queue_depth.labels(self.served.spec).set(len(self._queue))


def _uncached(function: Callable[..., Result], *args: object, **kwargs: object) -> Result:
    """``function`` with no token states stored: a server sees each text once, and storing every request's
    token states would fill the cache and, past its budget, evict what other runs need."""
    with token_states_uncached():
        return function(*args, **kwargs)
