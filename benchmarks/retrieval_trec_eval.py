"""embedlab's retrieval metrics against trec_eval (pytrec_eval) on embedlab's own run file.

Runs ``retrieval:qqp`` (or ``--folder`` BEIR folder) for one spec with ``run_out``, reads the TREC run back,
scores it with pytrec_eval (trec_eval's own code) and prints, for every metric and cut-off, both means and
their largest difference (MRR@k: trec_eval's recip_rank on the run cut to its top k).

    python benchmarks/retrieval_trec_eval.py [--spec minilm] [--folder PATH] [--k 1,3,5,10,100]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pytrec_eval

import embedlab
from embedlab.evaluation.harness import parse_tasks

TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P"}


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        query, _, doc, _, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="minilm")
    parser.add_argument("--folder", default=None, help="a BEIR folder instead of retrieval:qqp")
    parser.add_argument("--k", default="1,3,5,10,100")
    args = parser.parse_args()
    run_file = Path(tempfile.mkdtemp()) / "run.trec"
    (task,) = parse_tasks(f"retrieval:@{args.folder}" if args.folder else "retrieval:qqp", k=args.k, run_out=str(run_file))
    ours = {r.metric: r.value for r in task.run(embedlab.load(args.spec)) if r.subset == "all"}
    qrels, run, cutoffs = task.load().qrels, read_run(run_file), task.k
    measures = {f"{name}.{','.join(map(str, cutoffs))}" for name in TREC_NAMES.values()}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    worst = 0.0
    for measure in ("ndcg", "map", "mrr", "recall", "precision"):
        for k in cutoffs:
            if measure == "mrr":
                cut = {q: {d: run[q][d] for d in list(run[q])[:k]} for q in run}  # the file lists each query's run best first
                values = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
                theirs = np.mean([values[q]["recip_rank"] for q in values])
            else:
                theirs = np.mean([reference[q][f"{TREC_NAMES[measure]}_{k}"] for q in reference])
            difference = abs(ours[f"{measure}@{k}"] - theirs)
            worst = max(worst, difference)
            print(f"{measure}@{k:<4} embedlab {ours[f'{measure}@{k}']:.6f}  trec_eval {theirs:.6f}  |diff| {difference:.2e}")
    print(f"{args.spec} on {task.dataset}: {len(reference)} queries; largest difference {worst:.2e} (target <= 1e-6)")


if __name__ == "__main__":
    main()
