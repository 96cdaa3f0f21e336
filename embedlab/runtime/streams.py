"""Model batches on several CPU cores at once: one batch per core, each batch's torch ops on one thread.

A forward pass over a batch of short texts is a chain of small operations (a 32 × 20-token batch through
MiniLM: 3 ms matrix products, sub-millisecond layer norms, GELUs and additions). Spread over the cores op by
op (torch's intra-op threads), every op ends at a barrier where the cores wait for each other; run as one
batch per core, the cores never wait. The numbers do not change: an op's result does not depend on how many
threads compute it (tests/runtime/test_streams.py checks states against the one-thread run bit for bit).

Results come back in input order and at most ``streams`` batches are in flight, so memory stays that of
``streams`` batches however long the input. torch's thread count is process-wide, so a run sets it to one
on its worker threads and gives the caller's count back when it ends (another thread's torch work in the
same process meanwhile runs on one thread: correct, only slower).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")


def stream_count(device: torch.device) -> int:
    """How many batches run at once on ``device``: one per torch thread on a CPU, one on a GPU (which
    runs a batch's ops in parallel itself)."""
    return max(1, torch.get_num_threads()) if device.type == "cpu" else 1


def _one_thread() -> None:
    torch.set_num_threads(1)


def ordered_map(work: Callable[[Item], Result], items: Iterable[Item], streams: int, ahead: int | None = None) -> Iterator[Result]:
    """``work(item)`` for each item, in order, ``streams`` items at a time on their own threads (torch
    ops single-threaded, without gradients). ``streams < 2`` runs on the calling thread as a plain map.

    ``ahead`` (default ``streams``): how many items may be handed out before the oldest one's result is
    taken. With the default a stream that finishes a short item waits for the oldest, longer one; a larger
    ``ahead`` lets it go on to the next items meanwhile, at the cost of holding up to ``ahead`` results."""
    if streams < 2:
        yield from map(work, items)
        return

    def run(item: Item) -> Result:
        with torch.inference_mode():  # grad mode is per thread: the caller's does not reach the workers
            return work(item)

    threads = torch.get_num_threads()
    try:
        with ThreadPoolExecutor(max_workers=streams, initializer=_one_thread, thread_name_prefix="embedlab-stream") as pool:
            pending: deque[Future[Result]] = deque()
            limit = max(streams, ahead or streams)
            for item in items:
                if len(pending) == limit:
                    yield pending.popleft().result()
                pending.append(pool.submit(run, item))
            while pending:
                yield pending.popleft().result()
    finally:
        torch.set_num_threads(threads)
