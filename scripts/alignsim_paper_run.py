"""Paper check for ALIGN-SIM (docs/alignsim.md): run the criteria for given method specs at paper-like
sizes through the evaluation harness and save each method's result (records + per-item margins) so one
report can combine them.

    nice -n 10 python scripts/alignsim_paper_run.py --out benchmarks/alignsim st:minilm minilm
    python scripts/alignsim_paper_run.py --out benchmarks/alignsim --report-only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import embedlab  # noqa: E402
from embedlab.evaluation.alignsim.items import SamplingConfig  # noqa: E402
from embedlab.evaluation.alignsim.sources import ALL_DATASETS  # noqa: E402
from embedlab.evaluation.alignsim.task import AlignSimSetup, MethodResult  # noqa: E402
from embedlab.evaluation.harness import evaluate  # noqa: E402
from embedlab.results.alignsim_report import write_report  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="*")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs-per-label", type=int, default=2500)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--triplets", type=int, default=1000)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    folder = args.out / "perturbations"
    setup = AlignSimSetup(sampling=SamplingConfig(args.seed, args.pairs_per_label, args.sentences, args.triplets, None),
                          batch_size=64, folder=folder)
    for dataset in ALL_DATASETS:
        if args.report_only and not (folder / f"{dataset}.summary.json").exists():
            raise SystemExit(f"no perturbation set for {dataset} under {folder}")
        started = time.time()
        built = setup.perturbations(dataset)  # read from the folder when its sampling matches
        print(f"{dataset}: ready in {time.time() - started:.0f}s {built.skipped}", flush=True)
    tasks = setup.tasks()
    for spec in args.specs:
        started = time.time()
        method = embedlab.load(spec)
        run = evaluate([method], tasks, log=lambda message: None)
        MethodResult.collect(method, run.records, tasks).save(args.out / "results")
        print(f"{spec}: scored in {time.time() - started:.0f}s", flush=True)
    results = [MethodResult.load(path) for path in sorted((args.out / "results").glob("*.json"))]
    summaries = {d: json.loads((folder / f"{d}.summary.json").read_text()) for d in ALL_DATASETS}
    print(write_report(results, args.out, list(ALL_DATASETS), summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
