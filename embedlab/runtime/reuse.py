"""Counting work served from a lower cache while a cost is being measured.

The evaluation scorer measures what an ``encode`` costs (``embedlab.evaluation.cost``); when the model's token
states for some texts come from the token-state cache (computed by an earlier run of another spec of the
same model, e.g. ``minilm`` before ``minilm:precision=ubinary``), the transformer did not run for them and
the measured time is not the method's cost. The token-state store reports such texts here; the measurement
reads the count and marks its figures. The count is a context variable: it holds for the measuring thread
(or asyncio task) only, and nothing is counted outside a measurement.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class ReuseCount:
    """Texts whose model states were read from a cache instead of computed, during one measurement."""

    texts: int = 0


_COUNT: ContextVar[ReuseCount | None] = ContextVar("embedlab_reuse_count", default=None)


@contextmanager
def counting_reuse() -> Iterator[ReuseCount]:
    """Count, until the block ends, the texts this thread's model runs read from a cache."""
    count = ReuseCount()
    token = _COUNT.set(count)
    try:
        yield count
    finally:
        _COUNT.reset(token)


def note_reused_texts(texts: int) -> None:
    """``texts`` texts' model states came from a cache (nothing happens outside :func:`counting_reuse`)."""
    count = _COUNT.get()
    if count is not None and texts > 0:
        count.texts += texts
