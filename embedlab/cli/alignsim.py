"""``embedlab alignsim``: run the ALIGN-SIM criteria (paper §4–5) on one or more method specs.

    embedlab alignsim st:minilm minilm --criteria 1,2,3,4,5 --datasets qqp,paws,mrpc,afin

builds the seeded perturbation sets (saved as JSON lines under ``--out``/perturbations), scores each
method, stores the records in the results database and writes ``--out``/report.md with the tables
and ε-histograms. ``--format json`` prints one record per line instead of the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embedlab.evaluation.alignsim import metrics
from embedlab.evaluation.alignsim.perturb import SamplingConfig, build_perturbation_set
from embedlab.results.alignsim_report import tables, write_report
from embedlab.evaluation.alignsim.runner import CRITERIA, run_method
from embedlab.evaluation.alignsim.sources import ALL_DATASETS, PARAPHRASE_DATASETS


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
    parser.add_argument("--seed", type=int, default=0, help="fixes every sample and perturbation (default 0)")
    parser.add_argument("--pairs-per-label", type=int, default=SamplingConfig.pairs_per_label, help="criterion 1 pairs per label")
    parser.add_argument("--sentences", type=int, default=SamplingConfig.sentences, help="criterion 2 sentences per dataset")
    parser.add_argument("--triplets", type=int, default=SamplingConfig.triplets, help="criteria 3/5 positive pairs per dataset")
    parser.add_argument("--afin-pairs", type=int, default=None, help="criterion 4 AFIN pairs (default: all)")
    parser.add_argument("--sim-epsilons", type=_float_list, default=metrics.COSINE_EPSILONS, help="ε grid for similarity margins")
    parser.add_argument("--ned-epsilons", type=_float_list, default=metrics.NED_EPSILONS, help="ε grid for NED margins")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("alignsim_report"), help="report folder (default ./alignsim_report)")
    parser.add_argument("--db", type=Path, default=None, help="results database (default: the ResultsDB default path)")
    parser.add_argument("--no-db", action="store_true", help="do not write records to the results database")
    parser.add_argument("--no-paper", action="store_true", help="leave the paper's SBERT rows out of the tables")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(handler=run_cli)


def _load_method(spec: str):
    import embedlab

    return embedlab.load(spec)


def _open_db(path: Path | None):
    from embedlab.results.database import ResultsDB

    return ResultsDB(path) if path is not None else ResultsDB()


def run_cli(args: argparse.Namespace, load_method=_load_method, open_db=_open_db) -> int:
    config = SamplingConfig(
        seed=args.seed,
        pairs_per_label=args.pairs_per_label,
        sentences=args.sentences,
        triplets=args.triplets,
        afin_pairs=args.afin_pairs,
    )
    criteria = set(args.criteria)
    datasets = list(args.datasets)
    # α/β (criteria 2, 4) need random pairs from all three paraphrase sets, even ones not asked for
    needed = list(datasets)
    if criteria & {2, 4}:
        needed += [d for d in PARAPHRASE_DATASETS if d not in needed]
    sets, summaries = {}, {}
    perturbation_folder = args.out / "perturbations"
    for dataset in needed:
        kinds = {f"c{c}" for c in criteria} if dataset in datasets else set()
        if dataset in PARAPHRASE_DATASETS and criteria & {2, 4}:
            kinds.add("c1")
        if dataset == "afin":
            kinds &= {"c4"}
        else:
            kinds -= {"c4"}
        if not kinds:
            continue
        perturbations = build_perturbation_set(dataset, config, kinds)
        perturbations.save(perturbation_folder)
        sets[dataset] = perturbations
        summaries[dataset] = json.loads((perturbation_folder / f"{dataset}.summary.json").read_text(encoding="utf-8"))
        print(f"alignsim: {dataset}: {summaries[dataset]['counts']} skipped {summaries[dataset]['skipped']}", file=sys.stderr)
    if not sets:
        print("alignsim: nothing to run: none of the requested criteria applies to the requested datasets", file=sys.stderr)
        return 2

    database = None if args.no_db else open_db(args.db)
    results = []
    for spec in args.specs:
        method = load_method(spec)
        result = run_method(
            method, sets, criteria, args.sim_epsilons, args.ned_epsilons, batch_size=args.batch_size
        )
        # records of datasets scored only for α/β are not reported under their name
        result.records = [r for r in result.records if r.dataset in datasets or r.dataset == "all"]
        result.margins = {k: v for k, v in result.margins.items() if k[0] in datasets}
        results.append(result)
        if database is not None:
            database.add(result.records, fingerprint=str(getattr(method, "fingerprint", "")), seed=args.seed)
    report = write_report(results, args.out, datasets, summaries, paper=not args.no_paper)
    if args.format == "json":
        for result in results:
            for record in result.records:
                print(json.dumps(record.as_dict()))
    else:
        print("\n".join(tables(results, datasets, paper=not args.no_paper)))
        print(f"report: {report}")
    return 0
