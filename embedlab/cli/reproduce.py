"""``embedlab reproduce``: the four papers' tables beside our numbers, in one report.

* ``embedlab reproduce --quick`` (the default) renders ``report.md`` and ``report.html`` from the paper
  values and records committed in the package: seconds, nothing computed.
* ``embedlab reproduce --recompute --paper X`` re-runs X's records through the evaluation harness, rewrites
  its records file (unchanged numbers stay byte-identical) and renders the report. Plans that take hours
  (neural micro-tuning, SentEval cross-validation, ALIGN-SIM at the paper's sizes) run only with
  ``--expensive``; the command says which it skipped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PAPER_CHOICES = ("neural", "pooling", "matching", "alignsim", "all")


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from embedlab.results.reproduce.recomputing import recompute
    from embedlab.results.reproduce.render import write_report
    from embedlab.results.reproduce.values import PAPERS

    papers = list(PAPERS) if args.paper == "all" else [args.paper]
    command = "embedlab reproduce " + ("--recompute" if args.recompute else "--quick") + f" --paper {args.paper}"
    _check_writable(args, papers)
    if args.recompute:
        from embedlab.results.database import ResultsDB

        db = ResultsDB(args.db) if args.db else None
        for paper in papers:
            recompute(paper, expensive=args.expensive, methods=args.method or (), tasks=args.task or (), db=db,
                      log=lambda message: print(message, file=sys.stderr, flush=True))
    markdown, page = write_report(papers, Path(args.out), command=command)
    print(f"wrote {markdown} and {page}")
    return 0


def _check_writable(args: argparse.Namespace, papers: list[str]) -> None:
    """Before hours of computing: options that only ``--recompute`` reads are refused without it, and the
    records files it rewrites and the report folder must take a new file."""
    from embedlab.errors import InputError
    from embedlab.results.reproduce.values import RECORDS
    from embedlab.runtime.outputs import check_output_file

    given = [name for name, value in (("--expensive", args.expensive), ("--method", args.method), ("--task", args.task),
                                      ("--db", args.db)) if value]
    if given and not args.recompute:
        raise InputError(f"{', '.join(given)} only change{'s' if len(given) == 1 else ''} what --recompute computes; "
                         "add --recompute, or leave them out for the report from the committed records")
    if args.recompute:
        for paper in papers:
            check_output_file(RECORDS / f"{paper}.jsonl", option="records file")
    check_output_file(Path(args.out) / "report.md")


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``reproduce``."""
    parser = subparsers.add_parser("reproduce", help="the papers' tables beside our numbers: one markdown + HTML report",
                                   description="The four papers' tables beside our numbers, in one markdown + offline HTML report.")
    parser.add_argument("--paper", choices=PAPER_CHOICES, default="all", help="which paper's cells (default: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="render from the committed records only (the default)")
    mode.add_argument("--recompute", action="store_true", help="re-run the paper's records through the harness first")
    parser.add_argument("--expensive", action="store_true", help="with --recompute: also the plans that take hours")
    parser.add_argument("--method", action="append", metavar="SPEC",
                        help="with --recompute: only this method spec's plans (repeatable), e.g. one Appendix G row")
    parser.add_argument("--task", action="append", metavar="FAMILY:DATASET",
                        help="with --recompute: only the plans' runs of this task (repeatable), e.g. triplets:summ-r")
    parser.add_argument("--db", help="with --recompute: results database to reuse and fill (default: none, recompute all)")
    parser.add_argument("--out", default="reproduce", help="folder for report.md and report.html (default: ./reproduce)")
    parser.set_defaults(handler=_cmd_reproduce)
