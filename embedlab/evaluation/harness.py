"""The evaluation harness proper: the task table (:data:`TASKS`), task selections and :func:`evaluate`,
which runs methods on tasks through the one scorer and the results database.

Every task class declares its datasets, options, headline metric and metric descriptions
(:mod:`embedlab.evaluation.base`); :data:`TASKS` lists them, and everything else here (the family
table, the default datasets, building tasks from a selection) is read from those declarations.

A task selection is a comma-separated list of families (all their default datasets), ``family:dataset``
items, ``family:@path`` for a user file, ``all``, or ``quick`` (a few minutes on two CPU cores).
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from embedlab.errors import InputError
from embedlab.evaluation.alignsim.own_task import OwnTextsTask
from embedlab.evaluation.alignsim.task import AlignSimTask
from embedlab.evaluation.base import Method, Metric, Task, as_method, method_identity
from embedlab.evaluation.bootstrap import check_resamples, with_interval
from embedlab.evaluation.classification import ClassificationTask
from embedlab.evaluation.clustering import ClusteringTask
from embedlab.evaluation.correlations import CorrelationsTask
from embedlab.evaluation.cost import collecting, load_before_measuring
from embedlab.evaluation.geometry import AlignmentTask, IsotropyTask
from embedlab.evaluation.pairs import PairsTask
from embedlab.evaluation.records import Record, record_of_row
from embedlab.evaluation.retrieval import RetrievalTask
from embedlab.evaluation.sts import STSTask
from embedlab.evaluation.triplets import TripletsTask
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.progress import progress_bar, status
from embedlab.runtime.settings import bootstrap_resamples

__all__ = ["TASKS", "TASK_FAMILIES", "USER_FILE_TASKS", "DEFAULT_DATASETS", "QUICK",
           "parse_tasks", "metric_of", "headline_of", "evaluate", "EvaluationRun"]

# The one list of task families, in the order tables list them. A new task: a module and one line here.
TASKS: tuple[type[Task], ...] = (
    STSTask, PairsTask, TripletsTask, CorrelationsTask, ClusteringTask, ClassificationTask, IsotropyTask,
    AlignmentTask, AlignSimTask, RetrievalTask,
)
TASK_FAMILIES: dict[str, type[Task]] = {task.name: task for task in TASKS}
# families whose user files (``family:@FILE``) another task class reads: ALIGN-SIM's label-free criteria
USER_FILE_TASKS: dict[str, type[Task]] = {OwnTextsTask.name: OwnTextsTask}
DEFAULT_DATASETS: dict[str, tuple[str, ...]] = {task.name: task.datasets for task in TASKS}
# The README's main job: every family on a small dataset, minutes on two CPU cores.
# About 11,000 distinct texts to encode (STS-B test, tweet, TREC); the rest reuses those encodings.
QUICK = ("sts:stsb", "pairs:sts", "triplets:sts", "correlations:stsb", "clustering:tweet", "classification:trec")


def metric_of(task: str, metric: str) -> Metric:
    """What ``metric`` of task family ``task`` means and which direction is better (reports read this)."""
    family = TASK_FAMILIES.get(task)
    return family.metric(metric) if family is not None else Task.metric(metric)


def headline_of(task: str, dataset: str) -> str | None:
    """The headline metric of ``task`` on ``dataset`` (None for a task family this version does not know)."""
    family = TASK_FAMILIES.get(task)
    return family.headline_of(dataset) if family is not None else None


def split_selection(selection: str) -> list[str]:
    """``selection`` split at its commas; ``\\,`` is a comma inside one item (a file or folder whose path
    holds a comma: ``triplets:@a\\,b.tsv``, ``retrieval:./my\\,corpus``), the one rule for every task."""
    return [item.replace("\\,", ",") for item in re.split(r"(?<!\\),", selection)]


def parse_tasks(selection: str | Iterable[str], **options) -> list[Task]:
    """Tasks from a selection such as ``"sts,pairs:mrpc,triplets:@groups.tsv"``, ``"all"`` or ``"quick"``.

    ``options`` go to the tasks that declare them: ``seed`` (clustering, classification, alignsim), ``split``,
    ``k``, ``run_out``, ``rerank`` (a loaded pairwise method), ``rerank_depth``, ``corpus_vectors`` (retrieval),
    ``pair_features`` (classification), ``layout`` (user grouped files: ``column`` or ``line``), ``product``
    (triplets, pairs, correlations: ``cosine`` or ``dot``).
    """
    items = [s.strip() for s in (split_selection(selection) if isinstance(selection, str) else selection) if s.strip()]
    if not items:
        raise InputError("no tasks selected")
    expanded: list[str] = []
    for item in items:
        if item == "all":
            expanded += [f"{family}:{d}" for family, names in DEFAULT_DATASETS.items() for d in names]
        elif item == "quick":
            expanded += list(QUICK)
        elif ":" in item:
            expanded.append(item)
        elif item in TASK_FAMILIES:
            expanded += [f"{item}:{d}" for d in DEFAULT_DATASETS[item]]
        else:
            raise InputError(f"unknown task {item!r}; expected one of {', '.join(TASK_FAMILIES)}, all, quick")
    tasks, seen = [], set()
    for item in expanded:
        family, _, dataset = item.partition(":")
        if family not in TASK_FAMILIES:
            raise InputError(f"unknown task {family!r} in {item!r}; expected one of {', '.join(TASK_FAMILIES)}")
        if item not in seen:
            seen.add(item)
            task = USER_FILE_TASKS.get(family, TASK_FAMILIES[family]) if dataset.startswith("@") else TASK_FAMILIES[family]
            tasks.append(task.create(dataset, options))
    return tasks


def _storable(records: list[Record]) -> list[Record]:
    """The records that hold a number. A NaN metric (a correlation with constant gold scores, Eq. 3 with
    no broken triplets) is undefined, not a result: it is returned to the caller and shown, with a
    warning, but never stored, so the rest of the evaluation carries on."""
    kept = []
    for record in records:
        if math.isnan(record.value):
            warnings.warn(f"{record.task}/{record.dataset} {record.subset} {record.metric} of {record.method} is NaN "
                          "(undefined, e.g. constant scores); not stored", RuntimeWarning, stacklevel=4)
        else:
            kept.append(record)
    return kept


@dataclass
class EvaluationRun:
    """What :func:`evaluate` did: records (fresh and reused) and the (method, task) pairs skipped."""

    records: list[Record] = field(default_factory=list)
    reused: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)  # method, task, dataset, reason


def evaluate(methods: Iterable[Method], tasks: Iterable[Task], *, db=None, force: bool = False, seed: int = 0,
             intersections: bool = False, log: Callable[[str], None] | None = None,
             bootstrap: int | None = None) -> EvaluationRun:
    """Run every task on every method, storing each finished (method, task, dataset) in ``db`` at once.

    A method is an embedlab method or any model with ``encode(texts)`` (e.g. a ``SentenceTransformer``).

    A (method, task, dataset) already in ``db`` with the same task settings and computed by the same
    method identity (:func:`~embedlab.evaluation.base.method_identity`: spec, model content, fitted state)
    is reused unless ``force``; one stored with other settings (another seed, other ALIGN-SIM sample
    sizes) or by another identity (another fit, changed model files, an older database) is replaced. Tasks that
    need vectors are skipped, with the reason, for pairwise methods. ``intersections``: for tasks that
    compare with a reference method (``needs_reference``: triplets' Eq. 3 intersection), also each later
    method against the first.

    ``bootstrap`` is B, the resamples of each record's 95 % confidence interval (None: ``$EMBEDLAB_BOOTSTRAP``,
    default 1000; 0: no intervals), drawn from ``seed``. Intervals are computed from the records' per-unit
    scores; for reused records whose stored interval was drawn with another B or seed, from the stored
    units, and written back in place (no text is encoded again).
    """
    say = log or status
    resamples = check_resamples(bootstrap_resamples() if bootstrap is None else bootstrap)
    methods, tasks = [as_method(method) for method in methods], list(tasks)
    run = EvaluationRun()
    # every task's files read and parsed first: a bad file for the last task fails now, naming file and line
    for task in tasks:
        if any(task.applies_to(method) for method in methods):
            task.check_data()
    total = len(methods) * len(tasks)
    bar = progress_bar(total=total, desc="tasks", unit="task")
    for number, (method, task) in enumerate(((m, t) for m in methods for t in tasks), start=1):
        bar.set_postfix_str(f"{task.name}/{task.dataset} {method.spec}", refresh=False)
        done = _evaluate_one(run, method, task, db=db, force=force, seed=seed, say=say, resamples=resamples)
        bar.update()
        if done:
            say(f"{done} ({number}/{total} tasks)")
    bar.close()
    if intersections and len(methods) > 1:
        for task in tasks:
            if task.needs_reference and task.applies_to(methods[0]):
                for other in methods[1:]:
                    if task.applies_to(other):
                        records = _against_reference(task, other, methods[0], db=db, force=force, seed=seed)
                        run.records += [with_interval(record, resamples, seed) for record in records]
    return run


def _evaluate_one(run: EvaluationRun, method: Method, task: Task, *, db, force: bool, seed: int,
                  say: Callable[[str], None], resamples: int) -> str | None:
    """Skip, reuse or run ``task`` for ``method``, adding to ``run``; the closing line of a fresh run (None
    when nothing ran)."""
    if not task.applies_to(method):
        reason = f"{method.spec} is a pairwise method; {task.name} needs embedding vectors"
        run.skipped.append((method.spec, task.name, task.dataset, reason))
        say(f"skip {task.name}/{task.dataset} for {method.spec}: {reason}")
        return None
    settings, identity = task.settings(), method_identity(method)
    stored = _stored_group(db, method, task, settings, identity) if db is not None and not force else []
    if stored and task.reuses(stored):
        run.records += _stored_intervals(db, stored, resamples, seed)
        run.reused.append((method.spec, task.name, task.dataset))
        say(f"reuse {task.name}/{task.dataset} for {method.spec} ({len(stored)} stored records)")
        return None
    say(f"run {task.name}/{task.dataset} for {method.spec}")
    started = time.perf_counter()
    load_before_measuring(method)  # the cost measures encoding, not loading the model
    with collecting(method) as tally:
        computed = task.run(method)
    cost = tally.cost()
    # every record carries the settings group it belongs to (part of its stored identity) and the cost of its vectors
    records = [replace(with_interval(record, resamples, seed), settings=settings, cost=cost) for record in computed]
    if db is not None:  # rows of other settings groups are never touched; this group's rows are replaced
        db.add(_storable(records), fingerprint=method.fingerprint, seed=seed, identity=identity)
    run.records += records
    return f"done {task.name}/{task.dataset} for {method.spec} in {time.perf_counter() - started:.1f} s"


def _stored_group(db, method: Method, task: Task, settings: dict, identity: str) -> list[Record]:
    """The stored records of ``method`` on ``task`` in the settings group ``settings`` computed under the method's
    current ``identity`` (rows of another identity — another fit, changed model files, an older database — are
    never reused; Eq. 3 intersection rows are the intersection step's own)."""
    rows = [row for row in db.provenance(method.spec, task.name, task.dataset, settings=settings)
            if row["identity"] == identity and not row["subset"].startswith("vs ")]
    return [record_of_row(row) for row in rows]


# the reason a stored record without per-unit scores gives (stored before they were kept)
NO_UNITS_NOTE = "no interval: recompute to get one (stored without per-unit scores)"


def _stored_intervals(db, stored: list[Record], resamples: int, seed: int) -> list[Record]:
    """Reused records with the interval B and ``seed`` ask for: as stored when drawn so, else recomputed
    from the stored per-unit scores and written back in place; none with B = 0."""
    if resamples == 0:
        return [with_interval(record, 0, seed) for record in stored]
    if not stored:
        return stored
    first = stored[0]
    draws = db.interval_draws(first.method, first.task, first.dataset)
    if draws and draws != {(resamples, seed)}:
        units = db.units(first.method, first.task, first.dataset)
        fresh = [with_interval(replace(record, units=units[(record.subset, record.metric)]), resamples, seed)
                 for record in stored if (record.subset, record.metric) in units]
        db.set_intervals(fresh, seed)
        by_key = {(record.subset, record.metric): record for record in fresh}
        stored = [by_key.get((record.subset, record.metric), record) for record in stored]
    return [record if record.has_interval or record.ci_note else replace(record, ci_note=NO_UNITS_NOTE)
            for record in stored]


def _against_reference(task: Task, method: Method, reference: Method, *, db, force: bool, seed: int) -> list[Record]:
    """``task``'s comparison of ``method`` with ``reference``: the stored records of this pair of identities,
    or the comparison computed now and stored."""
    subset, settings = f"vs {reference.spec}", task.settings()
    pair_identity = cache_key("intersection", method_identity(method), method_identity(reference))
    if db is not None and not force:
        rows = [row for row in db.provenance(method.spec, task.name, task.dataset, settings=settings) if row["subset"] == subset]
        stored = [record_of_row(row) for row in rows if row["identity"] == pair_identity]
        if stored and len(stored) == len(rows):
            return stored
    record = replace(task.against_reference(method, reference), settings=settings)
    if db is not None:
        db.add(_storable([record]), fingerprint=method.fingerprint, seed=seed, extra={"reference": reference.spec},
               identity=pair_identity)
    return [record]
