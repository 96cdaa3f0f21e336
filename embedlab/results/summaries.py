"""Headline and summary records: the one number per (method, task, dataset) that the papers' tables show,
and per-task averages of it (the shape of the pooling paper's Table 4). The headline metric is each task's own
declaration (``Task.headline_of``); nothing here knows a task by name."""

from __future__ import annotations

import math
from collections.abc import Sequence

from embedlab.evaluation.harness import headline_of
from embedlab.evaluation.records import Record
from embedlab.evaluation.settings_groups import settings_json


def headline_records(records: Sequence[Record]) -> list[Record]:
    """Each dataset's headline metric: from its ``"all"`` subset when it has one (STS12–16 concatenated,
    pooling paper §3.5.2), else from every subset; Eq. 3 intersections (``vs …``) are not headlines."""
    chosen = [r for r in records if r.metric == headline_of(r.task, r.dataset) and not r.subset.startswith("vs ")]
    pooled = {(r.method, r.task, r.dataset, settings_json(r.settings)) for r in chosen if r.subset == "all"}
    return [r for r in chosen if r.subset == "all" or (r.method, r.task, r.dataset, settings_json(r.settings)) not in pooled]


def summary_records(records: Sequence[Record]) -> list[Record]:
    """Per method and task family, the mean of the headline metric over its datasets (the shape of the pooling paper
    Table 4: average STS Spearman, average clustering accuracy, average classification accuracy). Each settings
    group is averaged on its own (a ``--k 10`` run never averages with a default one)."""
    by_key: dict[tuple[str, str, str, str], list[Record]] = {}
    for record in headline_records(records):
        by_key.setdefault((record.method, record.task, record.metric, settings_json(record.settings)), []).append(record)
    out = []
    for (method, task, metric, _), items in by_key.items():
        values = [r.value for r in items if not math.isnan(r.value)]
        if values:
            out.append(Record(method, task, "average", f"{len(values)} datasets", metric,
                              float(sum(values) / len(values)), len(values), settings=items[0].settings))
    return out
