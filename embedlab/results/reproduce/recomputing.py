"""Re-running a paper's recompute plans through the evaluation harness and merging the fresh records into
its committed records file, which then differs only where a recomputed number differs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from embedlab.results.reproduce.epsilon import alignsim_epsilon_records
from embedlab.results.reproduce.plans import RecomputePlan, plans
from embedlab.results.reproduce.values import RECORDS, StoredRecord, needed_keys, read_records, stored_from, write_records


def recompute(paper: str, *, expensive: bool = False, methods: Sequence[str] = (), tasks: Sequence[str] = (), db=None,
              log: Callable[[str], None] = print, records_folder: Path = RECORDS) -> list[StoredRecord]:
    """Re-run ``paper``'s plans through the harness and rewrite its records file.

    Records the plans do not produce (skipped expensive plans, values taken from documents) are kept
    as they are while a paper value asks for them, and a recomputed record whose number did not change
    keeps its line, so the rewritten file differs only where a recomputed number differs.
    """
    chosen, skipped = plans(paper, expensive=expensive, methods=methods, tasks=tasks)
    for plan in skipped:
        log(f"skipped (too expensive by default, --expensive runs it): {', '.join(plan.specs)} on {plan.tasks} — {plan.cost}")
    provenance = f"recomputed: embedlab reproduce --recompute --paper {paper}" + (" --expensive" if expensive else "")
    return store_recomputed(paper, run_plans(paper, chosen, db=db, log=log, provenance=provenance), records_folder)


def run_plans(paper: str, chosen: Sequence[RecomputePlan], *, db=None, log: Callable[[str], None] = print,
              provenance: str) -> dict[tuple, StoredRecord]:
    """Run ``chosen`` plans through the harness; the records the paper values ask for, by key."""
    from embedlab.evaluation.harness import evaluate, parse_tasks
    from embedlab.registry import load
    from embedlab.version import code_version

    wanted = needed_keys(paper)
    version = code_version()
    fresh: dict[tuple, StoredRecord] = {}
    for plan in chosen:
        tasks = parse_tasks(plan.tasks, **dict(plan.task_options))
        specs = ((plan.intersections_with,) if plan.intersections_with else ()) + plan.specs
        methods = [load(spec) for spec in specs]
        fingerprints = {method.spec: method.fingerprint for method in methods}
        produced: list[StoredRecord] = []
        for task in tasks:
            log(f"{paper}: {', '.join(specs)} on {task.name}:{task.dataset}")
            run = evaluate(methods, [task], db=db, intersections=plan.intersections_with is not None, log=log)
            for record in run.records:
                produced.append(replace(stored_from(record, fingerprint=fingerprints.get(record.method, ""), code_version=version,
                                                    provenance=provenance, protocol=plan.protocol),
                                        subset=record.subset + plan.subset_suffix))
        fresh.update({stored.key: stored for stored in produced if stored.key in wanted})
        if plan.epsilon_search:  # kept whatever grid wins: the paper values then name the grid
            fresh.update({stored.key: stored for stored in
                          alignsim_epsilon_records(methods, tasks, fingerprints, version=version, provenance=provenance)})
    return fresh


def store_recomputed(paper: str, fresh: dict[tuple, StoredRecord], records_folder: Path = RECORDS) -> list[StoredRecord]:
    """Merge freshly computed records into ``paper``'s records file and return them all.

    A recomputed record whose number did not change keeps its line (and the code version that first produced
    it), unless it now has an interval the line lacks; records not recomputed now are kept as they are while a
    paper value asks for them."""
    previous = {record.key: record for record in read_records(paper, records_folder)}
    wanted = needed_keys(paper)
    for key, record in list(fresh.items()):
        old = previous.get(key)
        if (old is not None and old.recomputed and old.n == record.n and old.unit == record.unit
                and math.isclose(old.value, record.value, rel_tol=1e-12, abs_tol=1e-15)
                and (not record.has_interval or old.interval() == record.interval())):
            fresh[key] = old  # the same number: keep the line (and the code version that first produced it)
    kept = [record for key, record in previous.items() if key not in fresh and key in wanted]  # no paper value asks for the others
    write_records(paper, [*kept, *fresh.values()], records_folder)
    return read_records(paper, records_folder)
