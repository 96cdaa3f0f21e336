"""embedlab alignsim: run the ALIGN-SIM criteria (paper §4–5) on one or more method specs.

    embedlab alignsim st:minilm minilm --criteria 1,2,3,4,5 --datasets qqp,paws,mrpc,afin

Builds seeded perturbation sets (saved as JSON lines in OUT/perturbations and reused when the sampling
matches), scores each method (results are stored in the results database and reused on a rerun unless
--force) and writes OUT/report.md with the tables and ε-histograms. The tables are printed on stdout:
--format table (plain text), markdown, or json / csv (one record per line, with its unit).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import embedlab
from embedlab.cli.arguments import add_format, add_out, add_quiet, non_negative_int, positive_int
from embedlab.evaluation.alignsim import metrics
from embedlab.evaluation.alignsim.items import PERTURBATIONS, SamplingConfig
from embedlab.evaluation.alignsim.sources import ALL_DATASETS
from embedlab.evaluation.alignsim.task import CRITERIA, AlignSimSetup, MethodResult
from embedlab.results.alignsim_report import tables, write_report
from embedlab.results.database import ResultsDB
from embedlab.results.tables import format_records
from embedlab.runtime.outputs import check_output_file
from embedlab.runtime.progress import progress_bar, status


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated criteria numbers, got {text!r}") from None
    bad = [v for v in values if v not in CRITERIA]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"criteria must be among {list(CRITERIA)}, got {text!r}")
    return sorted(set(values))


def _dataset_list(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    bad = [v for v in values if v not in ALL_DATASETS]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"datasets must be among {', '.join(ALL_DATASETS)}, got {text!r}")
    return list(dict.fromkeys(values))


def _float_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("the ε grid is empty")
    return values


def add_cli(subparsers) -> None:
    parser = subparsers.add_parser(
        "alignsim",
        help="ALIGN-SIM: five task-free semantic-alignment criteria (synonyms, antonyms, negation, jumbling)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="method specs, e.g. st:minilm minilm")
    parser.add_argument("--criteria", type=_int_list, default=list(CRITERIA), help="comma-separated, default 1,2,3,4,5")
    parser.add_argument("--datasets", type=_dataset_list, default=list(ALL_DATASETS), help="default qqp,paws,mrpc,afin")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="fixes every sample and perturbation (default 0)")
    parser.add_argument("--pairs-per-label", type=positive_int, default=SamplingConfig.pairs_per_label, help="criterion 1 pairs per label")
    parser.add_argument("--sentences", type=positive_int, default=SamplingConfig.sentences, help="criterion 2 sentences per dataset")
    parser.add_argument("--triplets", type=positive_int, default=SamplingConfig.triplets, help="criteria 3/5 positive pairs per dataset")
    parser.add_argument("--afin-pairs", type=positive_int, default=None, help="criterion 4 AFIN pairs (default: all)")
    parser.add_argument("--perturbation", choices=PERTURBATIONS, default=SamplingConfig.perturbation,
                        help="criteria 2/3 word replacement: ours (tagged verbs/adjectives, inflected; default) or authors "
                             "(the authors' code: any non-stop-word, all senses, uninflected, every occurrence)")
    parser.add_argument("--sim-epsilons", type=_float_list, default=metrics.COSINE_EPSILONS, help="ε grid for similarity margins")
    parser.add_argument("--ned-epsilons", type=_float_list, default=metrics.NED_EPSILONS, help="ε grid for NED margins")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="texts per model batch (default 32)")
    add_out(parser, "--output", type=Path, default=Path("alignsim_report"), help="report folder (default ./alignsim_report)")
    parser.add_argument("--db", type=Path, default=None,
                        help="results database file (default ./embedlab_results.sqlite, or $EMBEDLAB_RESULTS)")
    parser.add_argument("--no-db", action="store_true", help="do not read or write the results database")
    parser.add_argument("--force", action="store_true", help="recompute results already in the database")
    parser.add_argument("--no-paper", action="store_true", help="leave the paper's SBERT rows out of the tables")
    add_format(parser)
    add_quiet(parser)
    parser.set_defaults(handler=run_cli)


def _load_method(spec: str):
    return embedlab.load(spec)


def _open_db(path: Path | None) -> ResultsDB:
    return ResultsDB(path)


def run_cli(args: argparse.Namespace, load_method=_load_method, open_db=_open_db) -> int:
    setup = AlignSimSetup(
        criteria=tuple(args.criteria),
        datasets=tuple(args.datasets),
        sampling=SamplingConfig(seed=args.seed, pairs_per_label=args.pairs_per_label, sentences=args.sentences,
                                triplets=args.triplets, afin_pairs=args.afin_pairs, perturbation=args.perturbation),
        cosine_epsilons=args.sim_epsilons,
        ned_epsilons=args.ned_epsilons,
        batch_size=args.batch_size,
        folder=args.out / "perturbations",
    )
    check_output_file(args.out / "report.md")  # before any perturbation set is built or method run
    tasks = setup.tasks()
    if not tasks:
        print("alignsim: nothing to run: none of the requested criteria applies to the requested datasets", file=sys.stderr)
        return 2
    summaries = {}
    for dataset in progress_bar(setup.scored_datasets(), desc="perturbation sets", unit="dataset"):
        setup.perturbations(dataset)  # α/β (criteria 2, 4) need random pairs of all three paraphrase sets
        summaries[dataset] = json.loads((setup.folder / f"{dataset}.summary.json").read_text(encoding="utf-8"))
        items, skipped = (", ".join(f"{kind} {int(count)}" for kind, count in summaries[dataset][key].items()) or "none"
                          for key in ("counts", "skipped"))
        status(f"alignsim: {dataset}: items {items}; sentences skipped: {skipped}")
    methods = [load_method(spec) for spec in args.specs]
    database = None if args.no_db else open_db(args.db)
    from embedlab.evaluation.harness import evaluate  # the harness (every task's libraries) loads only for a run

    run = evaluate(methods, tasks, db=database, force=args.force, seed=args.seed,
                   log=lambda message: status(f"alignsim: {message}"))
    results = [MethodResult.collect(method, run.records, tasks) for method in methods]
    report = write_report(results, args.out, list(args.datasets), summaries, paper=not args.no_paper)
    if args.format in ("json", "csv"):
        print(format_records([record for result in results for record in result.records], args.format))
    else:
        print(tables(results, list(args.datasets), paper=not args.no_paper, output_format=args.format), end="")
        status(f"alignsim: wrote {report}")
    return 0
