"""``embedlab compare A B [C …] --tasks …``: which differences between methods are real.

Runs (or reuses from the results database, as ``eval`` does) every method on every task, then per task
dataset compares each method with the first on the headline metric (``--metric`` for another): the paired
difference with its paired-bootstrap 95 % interval and p-value, Holm-adjusted p-values across the call,
the analytic tests for two dependent correlations where the gold scores are shared, and which methods are
statistically tied with the best (:mod:`embedlab.results.comparison`). It takes ``eval``'s task options
(``--k``, ``--search``, ``--rescore``, ``--rerank`` …): they name the settings group of the results database it
compares (default: the defaults), and a status line says which.
"""

from __future__ import annotations

import argparse
import sys

from embedlab.cli.arguments import add_bootstrap, add_format
from embedlab.cli.task_options import add_run_options, add_task_options, tasks_from_options
from embedlab.errors import InputError


def run_units(run, db) -> dict:
    """Per-unit scores of every record of ``run``: in memory for fresh records, from ``db`` for reused ones (from
    the settings group each record belongs to); ``compare`` and ``choose`` read them."""
    from embedlab.evaluation.settings_groups import settings_json

    units = {(r.method, r.task, r.dataset, r.subset, r.metric): r.units for r in run.records if r.units is not None}
    groups = {(r.method, r.task, r.dataset, settings_json(r.settings)): r for r in run.records if r.units is None}
    for record in groups.values() if db is not None else ():
        for (subset, metric), found in db.units(record.method, record.task, record.dataset, record.settings).items():
            units.setdefault((record.method, record.task, record.dataset, subset, metric), found)
    return units


def run_compare(args: argparse.Namespace) -> int:
    from embedlab.cli.evaluate import load_method
    from embedlab.evaluation.bootstrap import check_resamples
    from embedlab.evaluation.harness import evaluate
    from embedlab.evaluation.settings_groups import describe_named_settings, in_named_group
    from embedlab.runtime.progress import status
    from embedlab.results.comparison import compare_records, format_comparison
    from embedlab.results.database import ResultsDB
    from embedlab.runtime.settings import bootstrap_resamples

    if len(args.specs) < 2:
        raise InputError("compare needs at least two methods (each is compared with the first)")
    resamples = check_resamples(bootstrap_resamples() if args.bootstrap is None else args.bootstrap)
    if resamples == 0:
        raise InputError("compare needs bootstrap resamples: --bootstrap must be at least 1")
    tasks = tasks_from_options(args, load_method)
    methods = [load_method(spec) for spec in args.specs]
    db = None if args.no_db else ResultsDB(args.db)
    run = evaluate(methods, tasks, db=db, force=args.force, seed=args.seed, bootstrap=resamples)
    # the records of the settings group the task options name, the one this line says (stored groups of other
    # settings are never mixed in: evaluate reuses or computes only this group)
    status(describe_named_settings(tasks))
    comparison = compare_records(in_named_group(run.records, tasks), run_units(run, db), [method.spec for method in methods],
                                 resamples=resamples, seed=args.seed, metric=args.metric)
    text = format_comparison(comparison, args.format)
    sys.stdout.write(text + "\n" if text else "")
    return 0


def add_cli(subparsers) -> None:
    """Register ``compare``."""
    parser = subparsers.add_parser(
        "compare", help="compare methods: paired differences with confidence intervals and Holm-adjusted p-values",
        description="Compare two or more method specs on tasks (each against the first), on each task's headline "
                    "metric: paired-bootstrap differences with 95%% intervals and p-values, Holm-adjusted across the "
                    "call, Williams' t / Steiger's Z / Zou's interval for correlations with shared gold scores, and "
                    "which methods are statistically tied with the best (docs/evaluation.md, Uncertainty).")
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="method specs; the first is the reference")
    add_run_options(parser)
    parser.add_argument("--metric", default=None, help="compare on this metric instead of each task's headline metric")
    add_task_options(parser)  # eval's task options: they name the settings group compared (default: the defaults)
    add_bootstrap(parser)
    add_format(parser)
    parser.set_defaults(handler=run_compare)
