"""The evaluation harness: one :class:`Task` interface, one module per evaluation of the four papers.

Task families and their datasets (``--tasks`` of ``embedlab eval``):

==============  ==================================================================  =========================
family          datasets                                                            source
==============  ==================================================================  =========================
sts             sts12 … sts16 (per subset, "all", mean), stsb, sick-r                 paper 2 §3.5.2
pairs           mrpc, sts (also paws, qqp)                                          seed 0 §3.3
triplets        mrpc, sts, summ-g, summ-r, text-summ-g, text-summ-r                 seed 0 §3.2
correlations    stsb, summeval                                                      seed 0 §3.4
clustering      agnews, biomedical, googlenews_ts, searchsnippets, stackoverflow,   paper 2 §3.5.1
                tweet
classification  mr, cr, subj, mpqa, sst2, trec, mrpc, sst5, sick-e                  paper 2 §3.5.3, ALIGN-SIM
isotropy        wikitext2                                                           paper 2 §3.5.4
alignment       stsb                                                                paper 2 §3.5.5
==============  ==================================================================  =========================

A task selection is a comma-separated list of families (all their default datasets), ``family:dataset``
items, ``family:@path`` for a user file, ``all``, or ``quick`` (a few minutes on two CPU cores).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from embedlab.evaluation.base import Method, NotApplicableError, Task, encode_texts, pair_scores
from embedlab.evaluation.classification import CLASSIFICATION_SETS, ClassificationTask
from embedlab.evaluation.clustering import ClusteringTask
from embedlab.evaluation.correlations import CORRELATION_DATASETS, CorrelationsTask
from embedlab.evaluation.geometry import AlignmentTask, IsotropyTask
from embedlab.evaluation.pairs import PairsTask
from embedlab.evaluation.sts import STS_DATASETS, STSTask
from embedlab.evaluation.triplets import TripletsTask
from embedlab.evaluation.records import Record

__all__ = ["Task", "Method", "NotApplicableError", "TASK_FAMILIES", "DEFAULT_DATASETS", "QUICK", "parse_tasks",
           "evaluate", "EvaluationRun", "encode_texts", "pair_scores"]

TASK_FAMILIES: dict[str, type[Task]] = {
    "sts": STSTask, "pairs": PairsTask, "triplets": TripletsTask, "correlations": CorrelationsTask,
    "clustering": ClusteringTask, "classification": ClassificationTask, "isotropy": IsotropyTask,
    "alignment": AlignmentTask,
}
DEFAULT_DATASETS: dict[str, tuple[str, ...]] = {
    "sts": STS_DATASETS,
    "pairs": ("mrpc", "sts"),
    "triplets": ("mrpc", "sts", "summ-g", "summ-r", "text-summ-g", "text-summ-r"),
    "correlations": CORRELATION_DATASETS,
    "clustering": ("agnews", "biomedical", "googlenews_ts", "searchsnippets", "stackoverflow", "tweet"),
    "classification": CLASSIFICATION_SETS,
    "isotropy": ("wikitext2",),
    "alignment": ("stsb",),
}
# The README's main job: every family on a small dataset, minutes on two CPU cores.
# About 11,000 distinct texts to encode (STS-B test, tweet, TREC); the rest reuses those encodings.
QUICK = ("sts:stsb", "pairs:sts", "triplets:sts", "correlations:stsb", "clustering:tweet", "classification:trec")


def _make(family: str, dataset: str, options: dict) -> Task:
    cls = TASK_FAMILIES[family]
    keywords = {}
    if family in ("clustering", "classification"):
        keywords["seed"] = options.get("seed", 0)
    if family == "classification" and "pair_features" in options:
        keywords["pair_features"] = options["pair_features"]
    if dataset.startswith("@"):
        path = dataset[1:]
        if family not in ("sts", "pairs", "triplets", "correlations", "clustering", "classification"):
            raise ValueError(f"task {family} does not take a user file ({dataset})")
        if not Path(path).expanduser().is_file():
            raise FileNotFoundError(f"data file not found: {Path(path).expanduser().resolve()} (given in --tasks as {family}:{dataset})")
        if family == "triplets":
            keywords["layout"] = options.get("layout", "column")
        return cls(Path(path).stem, path=path, **keywords)
    return cls(dataset, **keywords)


def parse_tasks(selection: str | Iterable[str], **options) -> list[Task]:
    """Tasks from a selection such as ``"sts,pairs:mrpc,triplets:@groups.tsv"``, ``"all"`` or ``"quick"``.

    ``options``: ``seed`` (clustering, classification), ``pair_features`` (classification), ``layout``
    (user grouped files: ``column`` or ``line``).
    """
    items = [s.strip() for s in (selection.split(",") if isinstance(selection, str) else selection) if s.strip()]
    if not items:
        raise ValueError("no tasks selected")
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
            raise ValueError(f"unknown task {item!r}; expected one of {', '.join(TASK_FAMILIES)}, all, quick")
    tasks, seen = [], set()
    for item in expanded:
        family, _, dataset = item.partition(":")
        if family not in TASK_FAMILIES:
            raise ValueError(f"unknown task {family!r} in {item!r}; expected one of {', '.join(TASK_FAMILIES)}")
        if item not in seen:
            seen.add(item)
            tasks.append(_make(family, dataset, options))
    return tasks


@dataclass
class EvaluationRun:
    """What :func:`evaluate` did: records (fresh and reused) and the (method, task) pairs skipped."""

    records: list[Record] = field(default_factory=list)
    reused: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)  # method, task, dataset, reason


def evaluate(methods: Iterable[Method], tasks: Iterable[Task], *, db=None, force: bool = False, seed: int = 0,
             intersections: bool = False, log: Callable[[str], None] | None = None) -> EvaluationRun:
    """Run every task on every method, storing each finished (method, task, dataset) in ``db`` at once.

    A (method, task, dataset) already in ``db`` is reused unless ``force``. Tasks that need vectors are
    skipped, with the reason, for pairwise methods. ``intersections``: for triplet tasks, also the Eq. 3
    intersection of each later method's broken triplets with the first method's.
    """
    say = log or (lambda message: print(message, file=sys.stderr))
    methods, tasks = list(methods), list(tasks)
    run = EvaluationRun()
    for method in methods:
        for task in tasks:
            if not task.applies_to(method):
                reason = f"{method.spec} is a pairwise method; {task.name} needs embedding vectors"
                run.skipped.append((method.spec, task.name, task.dataset, reason))
                say(f"skip {task.name}/{task.dataset} for {method.spec}: {reason}")
                continue
            if db is not None and not force and db.has(method.spec, task.name, task.dataset):
                stored = [r for r in db.records(method.spec, task.name, task.dataset) if not r.subset.startswith("vs ")]
                run.records += stored
                run.reused.append((method.spec, task.name, task.dataset))
                say(f"reuse {task.name}/{task.dataset} for {method.spec} ({len(stored)} stored records)")
                continue
            say(f"run {task.name}/{task.dataset} for {method.spec}")
            records = task.run(method)
            if db is not None:
                db.add(records, fingerprint=method.fingerprint, seed=seed)
            run.records += records
    if intersections and len(methods) > 1:
        reference = methods[0]
        for task in tasks:
            if not isinstance(task, TripletsTask) or not task.applies_to(reference):
                continue
            for other in methods[1:]:
                if not task.applies_to(other):
                    continue
                subset = f"vs {reference.spec}"
                if db is not None and not force:
                    stored = [r for r in db.records(other.spec, task.name, task.dataset) if r.subset == subset]
                    if stored:
                        run.records += stored
                        continue
                record = task.intersection(other, reference)
                if db is not None:
                    db.add([record], fingerprint=other.fingerprint, seed=seed, extra={"reference": reference.spec})
                run.records.append(record)
    return run
