"""``embedlab choose SPEC [SPEC ...] --tasks …``: which method for my budget.

Runs (or reuses from the results database, as ``eval`` does) every method on every task, with ``eval``'s task
options, then per task dataset prints each method's headline metric with its 95 % interval, its paired
difference from the best and whether it is tied with the best (``compare``'s test), what its vectors cost
(texts per second, bytes per vector, peak memory), whether it is on the Pareto front over quality and those
three costs, and the pick for each budget (:mod:`embedlab.results.choice`).
"""

from __future__ import annotations

import argparse
import sys

from embedlab.cli.arguments import add_bootstrap, add_format, non_negative_float
from embedlab.cli.task_options import add_run_options, add_task_options, tasks_from_options
from embedlab.errors import InputError


def run_choose(args: argparse.Namespace) -> int:
    from embedlab.cli.compare import run_units
    from embedlab.cli.evaluate import load_method
    from embedlab.evaluation.bootstrap import check_resamples
    from embedlab.evaluation.harness import evaluate
    from embedlab.evaluation.settings_groups import describe_named_settings, in_named_group, named_settings
    from embedlab.results.choice import check_rankable, choose, format_choices
    from embedlab.results.comparison import best_per_group
    from embedlab.results.database import ResultsDB
    from embedlab.results.metric_names import resolve_metric
    from embedlab.runtime.progress import status
    from embedlab.runtime.settings import bootstrap_resamples

    resamples = check_resamples(bootstrap_resamples() if args.bootstrap is None else args.bootstrap)
    if resamples == 0:
        raise InputError("choose needs bootstrap resamples (its intervals and ties): --bootstrap must be at least 1")
    tasks = tasks_from_options(args, load_method)
    metric = resolve_metric(args.metric, set()) if args.metric else None  # other tools' names: NDCG@10, ndcg_cut_10 …
    check_rankable(tasks, metric)  # before any model is loaded
    methods = [load_method(spec) for spec in args.specs]
    db = None if args.no_db else ResultsDB(args.db)
    run = evaluate(methods, tasks, db=db, force=args.force, seed=args.seed, bootstrap=resamples)
    groups = best_per_group(in_named_group(run.records, tasks), run_units(run, db), resamples=resamples, seed=args.seed,
                            metric=metric, untested="keep")  # a metric without units still ranks, untested
    missing = [f"{t.name}/{t.dataset}" for t in tasks if not any(key[:2] == (t.name, t.dataset) for key in groups)]
    if missing:
        raise InputError(f"no {metric or 'headline'} record for {', '.join(missing)} (every method skipped, or the "
                         "task options leave the metric out, e.g. --k without 10 for ndcg@10); give --metric")
    status(describe_named_settings(tasks))  # the settings group compared, as compare says it
    choices = choose(groups, settings=named_settings(tasks), within=args.within)
    notes = [f"skipped {method} on {task}/{dataset}: {reason}" for method, task, dataset, reason in run.skipped]
    text = format_choices(choices, args.format, notes)
    sys.stdout.write(text + "\n" if text else "")
    return 0


def add_cli(subparsers) -> None:
    """Register ``choose``."""
    parser = subparsers.add_parser(
        "choose", help="which method for my budget: quality with intervals, ties with the best, cost, Pareto front",
        description="Evaluate method specs on tasks (reusing stored results) and, per task dataset, show each method's "
                    "headline metric with its 95 % interval, whether it is statistically tied with the best (compare's "
                    "paired test), texts per second, bytes per vector and peak memory, whether it is on the Pareto front "
                    "over quality and those three costs, and what to pick: the best, the fastest tied with the best, "
                    "the smallest vectors within --within of the best (docs/evaluation.md, Choosing a method).")
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="method specs, e.g. minilm minilm:precision=ubinary")
    add_run_options(parser)
    parser.add_argument("--metric", default=None, help="rank on this metric instead of each task's headline metric")
    parser.add_argument("--within", type=non_negative_float, default=0.01,
                        help="the smallest-vectors budget: methods within this much of the best value (default 0.01)")
    add_bootstrap(parser)
    add_task_options(parser)
    add_format(parser)
    parser.set_defaults(handler=run_choose)
