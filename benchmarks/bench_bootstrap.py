"""What the 95 % bootstrap intervals cost: B = 1,000 resamples on STS-B against the evaluation itself.

1. ``minilm`` is evaluated on ``sts:stsb`` from an empty cache (no token states, no encodings) with
   intervals off (``bootstrap=0``): the evaluation time T.
2. The intervals of the run's records (Spearman, Pearson, Kendall τ-b and τ-c over the 1,379 test pairs)
   are computed from their per-unit scores with B = 1,000, as ``evaluate`` does after a task runs: the
   bootstrap time t (best of ``--repeats``; each interval draws its own index matrix).
3. The whole evaluation is run again from another empty cache with B = 1,000 (``evaluate(bootstrap=1000)``),
   so the total is measured too, not only inferred.

The target (issue 44): t ≤ 5 % of T.

    python benchmarks/bench_bootstrap.py [--method minilm] [--resamples 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import fresh_cache

import embedlab
from embedlab.evaluation.bootstrap import with_interval
from embedlab.evaluation.harness import evaluate, parse_tasks


def _evaluate(spec: str, resamples: int) -> tuple[float, list]:
    """Seconds to evaluate ``spec`` on STS-B test from an empty cache, and the records."""
    fresh_cache(spec)
    method = embedlab.load(spec)
    started = time.perf_counter()
    run = evaluate([method], parse_tasks("sts:stsb"), bootstrap=resamples, log=lambda _: None)
    return time.perf_counter() - started, run.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", default="minilm")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    evaluation, records = _evaluate(args.method, 0)
    timings = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        intervals = [with_interval(record, args.resamples, 0) for record in records]
        timings.append(time.perf_counter() - started)
    bootstrap = min(timings)
    total, with_intervals = _evaluate(args.method, args.resamples)
    print(f"{args.method} on sts:stsb (1,379 pairs), empty cache; B = {args.resamples}")
    print(f"  evaluation without intervals      {evaluation:8.2f} s")
    print(f"  intervals of its {len(records)} records      {bootstrap:8.3f} s  (best of {args.repeats}: "
          + ", ".join(f"{t:.3f}" for t in timings) + ")")
    print(f"  share of the evaluation           {100 * bootstrap / evaluation:8.2f} %  (target ≤ 5 %)")
    print(f"  evaluation with intervals (run 3) {total:8.2f} s")
    for record in intervals:
        print(f"    {record.metric:<10} {record.value:.4f} [{record.ci_low:.4f}, {record.ci_high:.4f}]")
    assert [(r.ci_low, r.ci_high) for r in with_intervals] == [(r.ci_low, r.ci_high) for r in intervals]  # same seed
    print(f"load average at end: {[f'{x:.2f}' for x in os.getloadavg()]}")


if __name__ == "__main__":
    main()
