"""Command line of the evaluation harness: ``embedlab eval``, ``embedlab results``, ``embedlab report``.

* ``eval SPEC [SPEC ...] --tasks ...`` runs tasks (see :mod:`embedlab.evaluation`), stores every finished
  (method, task, dataset) in the results database at once and prints a table (methods as columns), a
  markdown table, or JSON lines with the keys method, task, dataset, subset, metric, value, n. Finished
  results are reused unless ``--force``.
* ``results`` lists, filters and compares stored results.
* ``report --out report.html`` writes one offline HTML page with tables and plots.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from embedlab.errors import InputError
import embedlab
from embedlab.cli.arguments import add_bootstrap, add_format, add_out, add_quiet, positive_int, seed_int
from embedlab.cli.task_options import add_task_options, tasks_from_options

if TYPE_CHECKING:  # importing the harness costs seconds: only the commands that run it do
    from embedlab.evaluation.records import Record

def load_method(spec: str):
    """The method of a spec string (tests replace this to evaluate stand-in methods)."""
    return embedlab.load(spec)


def print_records(records: Sequence[Record], output_format: str, stream=None) -> None:
    """Records on stdout (or ``stream``) in ``output_format`` (see :mod:`embedlab.results.tables`)."""
    from embedlab.results.tables import format_records

    text = format_records(records, output_format)
    (stream or sys.stdout).write(text + "\n" if text else "")


def _filter(records: list[Record], args: argparse.Namespace) -> list[Record]:
    from embedlab.evaluation.settings_groups import matches_settings, parse_settings_filter
    from embedlab.results.metric_names import resolve_metrics

    wanted = parse_settings_filter(getattr(args, "settings", None))
    metrics = resolve_metrics(args.metric, {record.metric for record in records})  # NDCG@10, ndcg_cut_10 … : ndcg@10

    def keep(record: Record) -> bool:
        return ((not metrics or record.metric in metrics)
                and (not args.subset or record.subset in args.subset) and matches_settings(record.settings, wanted))

    return [r for r in records if keep(r)]


def _stored(args: argparse.Namespace) -> list[Record]:
    from embedlab.results.database import ResultsDB

    db = ResultsDB(args.db, create=False)
    methods = args.method or [None]
    tasks = args.task or [None]
    datasets = args.dataset or [None]
    records: list[Record] = []
    for method in methods:
        for task in tasks:
            for dataset in datasets:
                records += db.records(method=method, task=task, dataset=dataset)
    return _filter(records, args)


def run_eval(args: argparse.Namespace) -> int:
    from embedlab.evaluation.harness import evaluate
    from embedlab.results.database import ResultsDB

    if args.engine != "ray" and (args.address or args.workers):
        raise InputError("--address and --workers are options of --engine ray")
    tasks = tasks_from_options(args, load_method)
    methods = [load_method(spec) for spec in args.specs]  # an unknown spec or model fails here, before any work
    _check_retrieval_methods(args, tasks, methods)
    db = None if args.no_db else ResultsDB(args.db)
    if args.run_out and db is not None:
        from embedlab.runtime.outputs import check_output_file

        check_output_file(Path(args.run_out), inputs=(db.path,), option="--run-out")  # never over the results database
    session = contextlib.nullcontext()
    if args.engine == "ray":  # each method's encoding of its unique texts runs on Ray actors; pairwise methods stay here
        from embedlab.engines.ray_engine import RayEncodedMethod, ray_session

        methods = [method if method.pairwise else RayEncodedMethod(method, workers=args.workers) for method in methods]
        session = ray_session(args.address, args.workers)
    with session:
        run = evaluate(methods, tasks, db=db, force=args.force, seed=args.seed, intersections=args.intersection,
                       bootstrap=args.bootstrap)
    print_records(_shape(_filter(run.records, args), args), args.format)
    return 0


def _check_retrieval_methods(args: argparse.Namespace, tasks: list, methods: list) -> None:
    from embedlab.evaluation.retrieval import check_rescore

    if any(task.name == "retrieval" for task in tasks):
        for method in methods:
            if not getattr(method, "pairwise", False):  # a pairwise method is skipped by retrieval
                check_rescore(method, args.rescore)


def _shape(records: list[Record], args: argparse.Namespace) -> list[Record]:
    from embedlab.results.summaries import headline_records, summary_records

    if getattr(args, "summary", False):
        return headline_records(records) + summary_records(records)
    return records


def run_results(args: argparse.Namespace) -> int:
    records = _shape(_stored(args), args)
    if args.delete:
        return _delete(records, args)
    if args.cost:
        from embedlab.results.tables import format_costs

        text = format_costs(records, args.format)
        sys.stdout.write(text + "\n" if text else "")
        return 0
    print_records(records, args.format)
    return 0


def _delete(records: list[Record], args: argparse.Namespace) -> int:
    """``results --delete``: the rows the filters select, listed, then removed (never without a filter)."""
    from embedlab.results.database import ResultsDB

    if args.summary:
        raise InputError("--delete removes stored rows; --summary computes averages: give one of them")
    if not any((args.method, args.task, args.dataset, args.metric, args.subset, args.settings)):
        raise InputError("results --delete needs a filter (--method, --task, --dataset, --settings, --metric or --subset); "
                         "it never empties the whole database")
    db = ResultsDB(args.db, create=False)
    print_records(records, args.format)
    removed = db.delete(records)
    print(f"embedlab results: deleted {removed} row{'s' * (removed != 1)} from {db.path}", file=sys.stderr)
    return 0


def run_report(args: argparse.Namespace) -> int:
    from embedlab.results.database import ResultsDB
    from embedlab.results.report import Provenance, write_report

    from embedlab.runtime.outputs import check_output_file

    records = _stored(args)
    database = ResultsDB(args.db, create=False)
    check_output_file(Path(args.out), inputs=(database.path,))  # the report never replaces the database
    if not records:
        print(f"embedlab report: no stored results match in {database.path}", file=sys.stderr)
        return 1
    from embedlab.evaluation.settings_groups import settings_json

    kept = {(r.method, r.task, r.dataset, r.subset, r.metric, settings_json(r.settings)) for r in records}
    rows = [row for row in database.provenance()
            if (row["method"], row["task"], row["dataset"], row["subset"], row["metric"], settings_json(row["settings"])) in kept]
    command = shlex.join(getattr(args, "command_line", ["embedlab", "report"]))
    provenance = Provenance(rows=rows, command=command, source=database.path.name)
    path = write_report(records, args.out, title=args.title, provenance=provenance,
                        against_best=_against_best(records, database))
    print(f"wrote {path} ({len(records)} records)")
    return 0


def _against_best(records: list[Record], database) -> dict:
    """Each headline group's methods against its best (:func:`~embedlab.results.comparison.best_per_group`), from
    the stored per-unit scores (B = 1,000 resamples from seed 0): the report's tie marks, difference and cost
    charts. Where a method has rows of several settings groups, the defaults' rows are compared (the report takes
    no task options); groups without stored units get no marks."""
    from embedlab.evaluation.bootstrap import DEFAULT_RESAMPLES
    from embedlab.evaluation.settings_groups import settings_json
    from embedlab.results.comparison import best_per_group, compared_records

    grouped: dict[tuple[str, str, str], set[str]] = {}
    for record in records:
        grouped.setdefault((record.method, record.task, record.dataset), set()).add(settings_json(record.settings))
    chosen = [r for r in records if len(grouped[(r.method, r.task, r.dataset)]) == 1 or not r.settings]
    units = {}
    for method, task, dataset, settings in {(r.method, r.task, r.dataset, settings_json(r.settings)): None
                                            for r in compared_records(chosen, None)}:
        for (subset, metric), found in database.units(method, task, dataset, json.loads(settings)).items():
            units[(method, task, dataset, subset, metric)] = found
    return best_per_group(chosen, units, resamples=DEFAULT_RESAMPLES, seed=0, untested="skip")


def _common(parser: argparse.ArgumentParser, with_format: bool = True) -> None:
    add_quiet(parser)
    parser.add_argument("--db", default=None, help="results database file (default ./embedlab_results.sqlite, or $EMBEDLAB_RESULTS)")
    parser.add_argument("--metric", action="append", help="keep only this metric (repeatable)")
    parser.add_argument("--subset", action="append", help="keep only this subset (repeatable)")
    parser.add_argument("--settings", action="append", metavar="KEY=VALUE",
                        help="keep only rows computed with these task settings (repeatable or comma-separated: "
                             "--settings k=10,search=hnsw; 'defaults': only rows of default settings)")
    if with_format:
        add_format(parser)
        parser.add_argument("--summary", action="store_true",
                            help="only each dataset's headline number plus per-task averages (the pooling paper's Table 4 shape)")


def add_cli(subparsers) -> None:
    """Register ``eval``, ``results`` and ``report`` on an argparse subparsers object."""
    evaluate_parser = subparsers.add_parser(
        "eval", help="evaluate embedding methods on the harness's tasks",
        description="Evaluate one or more method specs on task families (docs/evaluation.md; an unknown name "
                    "lists them): 'family' runs its default datasets, 'family:dataset' one dataset, 'family:@FILE' "
                    "a user file; 'all' runs everything, 'quick' a few minutes' selection.")
    evaluate_parser.add_argument("specs", nargs="+", metavar="SPEC", help="method spec, e.g. minilm or st:minilm")
    evaluate_parser.add_argument("--tasks", default="quick", help="comma-separated task selection (default: quick)")
    evaluate_parser.add_argument("--force", action="store_true", help="recompute results already in the database")
    evaluate_parser.add_argument("--no-db", action="store_true", help="do not read or write the results database")
    evaluate_parser.add_argument("--seed", type=seed_int, default=0,
                                 help="seed of every random choice (k-means, CV folds, ALIGN-SIM samples, bootstrap resamples)")
    add_bootstrap(evaluate_parser)
    evaluate_parser.add_argument("--intersection", action="store_true",
                                 help="triplets: also the Eq. 3 intersection of each method's broken triplets with the first method's")
    add_task_options(evaluate_parser)
    evaluate_parser.add_argument("--engine", choices=("local", "ray"), default="local",
                                 help="ray: encode each task's unique texts on Ray actors (pip install 'embedlab[ray]'; docs/scale.md)")
    evaluate_parser.add_argument("--address", default=None, help="--engine ray: cluster to attach to (default $RAY_ADDRESS, else a local Ray)")
    evaluate_parser.add_argument("--workers", type=positive_int, default=None, help="--engine ray: actors (default: one per CPU)")
    _common(evaluate_parser)
    evaluate_parser.set_defaults(handler=run_eval)

    results_parser = subparsers.add_parser("results", help="list, filter and compare stored results (methods as columns)")
    for name in ("method", "task", "dataset"):
        results_parser.add_argument(f"--{name}", action="append", help=f"keep only this {name} (repeatable)")
    results_parser.add_argument("--cost", action="store_true",
                                help="print what each method's vectors cost (encode time, texts/s, peak memory, bytes per vector …) "
                                     "instead of the values")
    results_parser.add_argument("--delete", action="store_true",
                                help="delete the rows the filters select (at least one filter), printing them first")
    _common(results_parser)
    results_parser.set_defaults(handler=run_results)

    report_parser = subparsers.add_parser("report", help="write an offline HTML report of stored results")
    for name in ("method", "task", "dataset"):
        report_parser.add_argument(f"--{name}", action="append", help=f"keep only this {name} (repeatable)")
    add_out(report_parser, "--output", default="report.html", help="HTML file to write (default report.html)")
    report_parser.add_argument("--title", default="embedlab evaluation report", help="the page's title")
    _common(report_parser, with_format=False)
    report_parser.set_defaults(handler=run_report)

