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
from embedlab.cli.arguments import add_bootstrap, add_format, add_out, add_quiet, non_negative_int, positive_int

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
    def keep(record: Record) -> bool:
        return ((not args.metric or record.metric in args.metric)
                and (not args.subset or record.subset in args.subset))

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


def tasks_from_options(args: argparse.Namespace) -> list:
    """The tasks of ``--tasks`` with the task options of :func:`add_task_options` (a ``--rerank`` method loaded),
    checked; shared by every command that evaluates (``eval``, ``choose``)."""
    from embedlab.evaluation.harness import parse_tasks

    rerank = load_method(args.rerank) if args.rerank else None
    tasks = parse_tasks(args.tasks, seed=args.seed, pair_features=args.pair_features,
                        layout="line" if args.groups_per_line else "column", product=args.product,
                        split=args.split, k=args.k, run_out=args.run_out, rerank=rerank, rerank_depth=args.rerank_depth,
                        corpus_vectors=args.corpus_vectors, search=args.search, rescore=args.rescore)
    _check_retrieval_flags(args, tasks)
    return tasks


def run_eval(args: argparse.Namespace) -> int:
    from embedlab.evaluation.harness import evaluate
    from embedlab.results.database import ResultsDB

    if args.engine != "ray" and (args.address or args.workers):
        raise InputError("--address and --workers are options of --engine ray")
    tasks = tasks_from_options(args)
    methods = [load_method(spec) for spec in args.specs]  # an unknown spec or model fails here, before any work
    db = None if args.no_db else ResultsDB(args.db)
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


def _check_retrieval_flags(args: argparse.Namespace, tasks: list) -> None:
    retrieval = [task for task in tasks if task.name == "retrieval"]
    given = [flag for flag, value in (("--run-out", args.run_out), ("--rerank", args.rerank), ("--corpus-vectors", args.corpus_vectors))
             if value]
    if given and not retrieval:
        raise InputError(f"{given[0]} is an option of retrieval tasks; --tasks selects none")
    if (args.run_out or args.corpus_vectors) and (len(retrieval) > 1 or len(args.specs) > 1):
        raise InputError("--run-out and --corpus-vectors belong to one run: give one method and one retrieval task")


def _shape(records: list[Record], args: argparse.Namespace) -> list[Record]:
    from embedlab.results.summaries import headline_records, summary_records

    if getattr(args, "summary", False):
        return headline_records(records) + summary_records(records)
    return records


def run_results(args: argparse.Namespace) -> int:
    print_records(_shape(_stored(args), args), args.format)
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
    kept = {(r.method, r.task, r.dataset, r.subset, r.metric) for r in records}
    rows = [row for row in database.provenance()
            if (row["method"], row["task"], row["dataset"], row["subset"], row["metric"]) in kept]
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
    return best_per_group(chosen, units, resamples=DEFAULT_RESAMPLES, seed=0, strict=False)


def _common(parser: argparse.ArgumentParser, with_format: bool = True) -> None:
    add_quiet(parser)
    parser.add_argument("--db", default=None, help="results database file (default ./embedlab_results.sqlite, or $EMBEDLAB_RESULTS)")
    parser.add_argument("--metric", action="append", help="keep only this metric (repeatable)")
    parser.add_argument("--subset", action="append", help="keep only this subset (repeatable)")
    if with_format:
        add_format(parser)
        parser.add_argument("--summary", action="store_true",
                            help="only each dataset's headline number plus per-task averages (the pooling paper's Table 4 shape)")


def add_task_options(parser: argparse.ArgumentParser) -> None:
    """The options that reach the tasks (:func:`tasks_from_options` reads them), one definition for every command
    that evaluates: ``--pair-features``, ``--groups-per-line``, ``--product`` and the retrieval options."""
    parser.add_argument("--pair-features", choices=("senteval", "full"), default="senteval",
                        help="MRPC/SICK-E classifier features: senteval [|u-v|, u*v] or full [u, v, |u-v|, u*v]")
    parser.add_argument("--groups-per-line", action="store_true", help="user grouped files (triplets:@FILE) hold one group per line")
    parser.add_argument("--product", choices=("cosine", "dot"), default="cosine",
                        help="triplets, pairs, correlations: the embedding product; dot keeps the embeddings as "
                             "encoded (neural-embeddings paper Appendix F; subsets named SUBSET,product=dot)")
    _retrieval_options(parser)


def _retrieval_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("retrieval (retrieval:qqp, retrieval:@BEIR_FOLDER; docs/evaluation.md)")
    group.add_argument("--split", default="test", help="qrels split of a BEIR folder: qrels/SPLIT.tsv (default test)")
    group.add_argument("--k", default="1,3,5,10,100", help="cut-offs of nDCG, MAP, MRR, recall, precision (default 1,3,5,10,100)")
    group.add_argument("--run-out", metavar="FILE", default=None, help="write the first stage's run in TREC run format (qid Q0 docid rank score tag)")
    group.add_argument("--rerank", metavar="SPEC", default=None,
                       help="re-score the first stage's top documents with a pairwise method (match:minilm, match:minilm,mode=bertscore)")
    group.add_argument("--rerank-depth", type=positive_int, default=100, help="how many first-stage documents --rerank re-scores (default 100)")
    group.add_argument("--search", choices=("exact", "hnsw"), default="exact",
                       help="first stage: exact (blocked, trec_eval's tie order) or hnsw (faiss's approximate index; pip install faiss-cpu)")
    group.add_argument("--rescore", type=non_negative_int, default=0, metavar="M",
                       help="binary vectors (precision=ubinary|binary): re-rank the first M×k Hamming candidates with the float "
                            "query against the documents' bits (0: Hamming order alone)")
    group.add_argument("--corpus-vectors", metavar="FOLDER", default=None,
                       help="the corpus already embedded by `embed SPEC --input FOLDER/corpus.jsonl --out FOLDER` with the same spec")


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
    evaluate_parser.add_argument("--seed", type=non_negative_int, default=0,
                                 help="seed of every random choice (k-means, CV folds, ALIGN-SIM samples, bootstrap resamples)")
    add_bootstrap(evaluate_parser)
    add_task_options(evaluate_parser)
    evaluate_parser.add_argument("--intersection", action="store_true",
                                 help="triplets: also the Eq. 3 intersection of each method's broken triplets with the first method's")
    evaluate_parser.add_argument("--engine", choices=("local", "ray"), default="local",
                                 help="ray: encode each task's unique texts on Ray actors (pip install 'embedlab[ray]'; docs/scale.md)")
    evaluate_parser.add_argument("--address", default=None, help="--engine ray: cluster to attach to (default $RAY_ADDRESS, else a local Ray)")
    evaluate_parser.add_argument("--workers", type=positive_int, default=None, help="--engine ray: actors (default: one per CPU)")
    _common(evaluate_parser)
    evaluate_parser.set_defaults(handler=run_eval)

    results_parser = subparsers.add_parser("results", help="list, filter and compare stored results (methods as columns)")
    for name in ("method", "task", "dataset"):
        results_parser.add_argument(f"--{name}", action="append", help=f"keep only this {name} (repeatable)")
    _common(results_parser)
    results_parser.set_defaults(handler=run_results)

    report_parser = subparsers.add_parser("report", help="write an offline HTML report of stored results")
    for name in ("method", "task", "dataset"):
        report_parser.add_argument(f"--{name}", action="append", help=f"keep only this {name} (repeatable)")
    add_out(report_parser, "--output", default="report.html", help="HTML file to write (default report.html)")
    report_parser.add_argument("--title", default="embedlab evaluation report", help="the page's title")
    _common(report_parser, with_format=False)
    report_parser.set_defaults(handler=run_report)

