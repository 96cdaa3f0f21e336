"""Counting work served from a lower cache while a cost is being measured.

The evaluation scorer measures what an ``encode`` costs (``embedlab.evaluation.cost``); when the model's token
states for some texts come from the token-state cache (computed by an earlier run of another spec of the
same model, e.g. ``minilm`` before ``minilm:precision=ubinary``), the transformer did not run for them and
the measured time is not the method's cost. The token-state store (and the neural family's per-text cache)
reports here which texts it served and which it computed; a text computed earlier in the same measured run
(a question that is both a query and a document) is the run's own work and is not counted. The count is a
context variable: it holds for the measuring thread (or asyncio task) only, and nothing is counted outside
:func:`counting_reuse`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class ReuseCount:
    """During one measured run: the texts whose model states a cache served that the run had not computed
    itself (``texts``), and the texts it computed (``computed``)."""

    texts: int = 0
    computed: set[str] = field(default_factory=set)


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


def current_reuse() -> ReuseCount | None:
    """The count of the measurement in progress in this thread, or None."""
    return _COUNT.get()


def note_reused_texts(texts: Iterable[str]) -> None:
    """These texts' model states came from a cache (those the measured run computed itself are not counted)."""
    count = _COUNT.get()
    if count is not None:
        count.texts += sum(text not in count.computed for text in texts)


def note_computed_texts(texts: Iterable[str]) -> None:
    """These texts ran through the model in the measured run (a later cache hit on them is the run's own work)."""
    count = _COUNT.get()
    if count is not None:
        count.computed.update(texts)
