"""Dynamic batching: concurrent requests for one method coalesced into one ``encode`` call.

Each served method has one :class:`Batcher`: a queue of waiting requests and one thread that runs the
model (a method is not safe to call from two threads at once, and the event loop must stay free to
accept and answer requests while it runs). While that thread encodes one batch, new requests queue up;
when it is free, everything waiting goes into the next call, up to ``max_batch_tokens`` tokens. A request
larger than that is split across batches: one part per batch, and the requests that arrived while a part
ran go before its next part (in the same batch where the budget allows), so a large request delays a
small one by at most one batch. An idle thread waits at most ``max_wait_s`` after the first request for
others to join it. A full queue is refused (:class:`QueueFull`, answered 503 with ``Retry-After``)
rather than grown without bound. A request whose client went away is cancelled: its texts not yet
encoded are dropped (the parts of a split request still waiting included); the other requests of its
batch get their answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from embedlab.runtime.settings import token_states_uncached
from embedlab.serve.metrics import ServerMetrics
from embedlab.serve.served import ServedMethod

Result = TypeVar("Result")


class QueueFull(Exception):
    """The method's queue holds ``max_queue`` requests already."""


@dataclass(frozen=True)
class Output:
    """What a request asks of its vectors beyond the texts: ``encode``'s ``truncate_dim``, ``normalize_embeddings``
    and ``prompt_name`` (requests that differ in these are encoded in separate calls of one batch)."""

    truncate_dim: int | None = None
    normalize: bool = False
    prompt_name: str | None = None


@dataclass(eq=False)
class Job:
    """One request's texts (with each text's tokens), the vectors of its parts encoded so far, and the
    future its answer goes to."""

    texts: list[str]
    text_tokens: list[int]
    output: Output
    future: asyncio.Future
    enqueued: float = field(default_factory=time.monotonic)
    taken: int = 0  # texts handed to batches so far
    encoded: list[np.ndarray] = field(default_factory=list)
    encoded_count: int = 0

    @property
    def tokens_left(self) -> int:
        return sum(self.text_tokens[self.taken:])

    def add_rows(self, rows: np.ndarray) -> None:
        """The vectors of its next part; the answer once every text has its vector."""
        self.encoded.append(rows)
        self.encoded_count += len(rows)
        if self.encoded_count == len(self.texts):
            self.future.set_result(self.encoded[0] if len(self.encoded) == 1 else np.concatenate(self.encoded))


@dataclass(frozen=True)
class Part:
    """Texts ``start:stop`` of a job, in one batch."""

    job: Job
    start: int
    stop: int

    @property
    def texts(self) -> list[str]:
        return self.job.texts[self.start:self.stop]


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
        self._continuing: list[Job] = []  # split jobs whose next part waits for the batch that runs now to end
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
        for job in [*self._queue, *self._continuing]:
            job.future.cancel()
        self._executor.shutdown(wait=True)

    # -- what requests call ------------------------------------------------------------------------
    async def encode(self, texts: list[str], text_tokens: list[int], output: Output = Output()) -> np.ndarray:
        """The vectors of ``texts`` (float32 rows; ``text_tokens``: each text's tokens), from whichever batches
        they join."""
        if len(self._queue) >= self.max_queue:
            self.metrics.rejected.labels(self.served.spec).inc()
            raise QueueFull(f"{self.served.spec}: {len(self._queue)} requests are waiting already")
        job = Job(list(texts), list(text_tokens), output, asyncio.get_running_loop().create_future())
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
        while sum(job.tokens_left for job in self._queue) < self.max_batch_tokens:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    def _take(self) -> list[Part]:
        """The waiting texts that fit the token budget (at least one), oldest request first; cancelled
        requests dropped. A request that does not fit whole gives the part that does, and waits for the
        batch to end before its next part is queued (behind the requests that arrive meanwhile)."""
        batch: list[Part] = []
        tokens = 0
        while self._queue:
            job = self._queue[0]
            if job.future.done():  # its client went away
                self._queue.popleft()
                continue
            stop = job.taken
            while stop < len(job.texts):
                cost = job.text_tokens[stop]
                if (batch or stop > job.taken) and tokens + cost > self.max_batch_tokens:  # the first text always goes
                    break
                tokens += cost
                stop += 1
            if stop == job.taken:  # the batch is full
                break
            self._queue.popleft()
            batch.append(Part(job, job.taken, stop))
            job.taken = stop
            if stop < len(job.texts):
                self._continuing.append(job)
                break
        self._set_depth()
        return batch

    async def _encode_batch(self, batch: list[Part]) -> None:
        """One encode call per output asked for in the batch; each job gets its rows or the error. Split
        jobs are queued again once the batch has run."""
        now = time.monotonic()
        labels = self.served.spec
        for part in batch:
            if part.start == 0:
                self.metrics.queue_wait.labels(labels).observe(now - part.job.enqueued)
        self.metrics.batch_requests.labels(labels).observe(len(batch))
        by_output: dict[Output, list[Part]] = {}
        for part in batch:
            by_output.setdefault(part.job.output, []).append(part)
        for output, parts in by_output.items():
            await self._encode_parts(output, [part for part in parts if not part.job.future.done()])
        self._queue.extend(job for job in self._continuing if not job.future.done())
        self._continuing.clear()
        self._set_depth()

    async def _encode_parts(self, output: Output, parts: list[Part]) -> None:
        if not parts:
            return
        labels = self.served.spec
        texts = [text for part in parts for text in part.texts]
        self.metrics.batch_texts.labels(labels).observe(len(texts))
        self.metrics.batch_tokens.labels(labels).observe(sum(sum(part.job.text_tokens[part.start:part.stop]) for part in parts))
        started = time.perf_counter()
        try:
            vectors = await asyncio.get_running_loop().run_in_executor(self._executor, self._encode, texts, output)
        except Exception as error:  # noqa: BLE001 - the error belongs to these requests, not to the server
            for part in parts:
                if not part.job.future.done():
                    part.job.future.set_exception(error)
            return
        self.metrics.encode_seconds.labels(labels).observe(time.perf_counter() - started)
        start = 0
        for part in parts:
            if not part.job.future.done():
                part.job.add_rows(vectors[start:start + part.stop - part.start])
            start += part.stop - part.start

    def _encode(self, texts: list[str], output: Output) -> np.ndarray:
        return _uncached(self.served.method.encode, texts, batch_size=self.batch_size, show_progress_bar=False,
                         truncate_dim=output.truncate_dim, normalize_embeddings=output.normalize, prompt_name=output.prompt_name)

    def _set_depth(self) -> None:
        self.metrics.queue_depth.labels(self.served.spec).set(len(self._queue))


def _uncached(function: Callable[..., Result], *args: object, **kwargs: object) -> Result:
    """``function`` with no token states stored: a server sees each text once, and storing every request's
    token states would fill the cache and, past its budget, evict what other runs need."""
    with token_states_uncached():
        return function(*args, **kwargs)
