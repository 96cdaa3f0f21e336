"""What both engines share (the local one in :mod:`embedlab.engines.runner`, Ray in
:mod:`embedlab.engines.ray_engine`), so that neither imports the other: how a corpus is cut into shards
and each shard into the slices one ``encode`` call takes."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from embedlab.errors import InputError
from embedlab.data.corpus import Corpus, CorpusScan

# Both engines encode a shard in the same slices (one ``encode`` call each, on this process or on an
# actor): at most this many texts, and at least _SLICES_PER_RUN slices per run so that every Ray actor gets
# several. Same slices → same length-sorted batches inside ``encode`` → the same float rounding, so the
# engines' vectors agree to the last bits rather than to ~1e-6; the progress bar moves once per slice.
_MAX_SLICE_ROWS = 512
_SLICES_PER_RUN = 16


@dataclass(frozen=True)
class ShardPlan:
    """Shard ``index`` covers ``rows`` records starting at corpus position ``start``."""

    index: int
    start: tuple[int, int]
    rows: int


def slice_rows(total: int) -> int:
    """Texts per ``encode`` call for a corpus of ``total`` texts (see ``_MAX_SLICE_ROWS``). Always from the
    whole corpus's count, never from what a resumed run has left, so that a resumed run encodes exactly
    the slices (and so the float rounding) of an uninterrupted one: bit-identical vectors."""
    return max(1, min(_MAX_SLICE_ROWS, math.ceil(total / _SLICES_PER_RUN)))


def shard_plans(scan: CorpusScan, shard_size: int) -> list[ShardPlan]:
    return [ShardPlan(index, start, min(shard_size, scan.count - index * shard_size)) for index, start in enumerate(scan.shard_starts)]


def read_plan(corpus: Corpus, plan: ShardPlan) -> tuple[list[int | str], list[str]]:
    """The ids and texts of one shard, read from its start position (nothing before it is decoded)."""
    records = list(itertools.islice(corpus.records(plan.start), plan.rows))
    if len(records) != plan.rows:
        raise InputError(f"{corpus.source} changed while embedding: shard {plan.index} has {len(records)} texts, expected {plan.rows}")
    return [record.id for record in records], [record.text for record in records]
