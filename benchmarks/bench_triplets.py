"""Benchmark: exact triplet counting for 5,000 texts in 500 groups of 10 (224,550,000 triplets).

This is the size of the neural-embeddings paper's cestwc sets (§3.2, Table 1). Target: at most 10 s. The embeddings are
random 384-dimensional vectors (the width of all-MiniLM-L6-v2); the count does not depend on where the
vectors come from. Run: ``python benchmarks/bench_triplets.py [--dim 384] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's embedlab, not an installed one

from embedlab.data.containers import grouped
from embedlab.evaluation.triplets import count_triplets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--size", type=int, default=10, help="texts per group")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    count = args.groups * args.size
    vectors = np.random.default_rng(0).normal(size=(count, args.dim)).astype(np.float32)
    data = grouped("bench", [f"text {k}" for k in range(count)], list(np.repeat(np.arange(args.groups), args.size)))
    timings = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        counts = count_triplets(vectors, data)
        timings.append(time.perf_counter() - start)
    expected = args.groups * args.size * (args.size - 1) * (count - args.size)
    assert counts.total == expected, (counts.total, expected)
    best = min(timings)
    print(f"{count} texts in {args.groups} groups of {args.size}: {counts.total:,} triplets, {counts.wrong:,} broken")
    print(f"exact count: best {best:.2f} s of {args.repeat} (all: {', '.join(f'{t:.2f}' for t in timings)}); "
          f"target <= 10 s: {'PASS' if best <= 10 else 'FAIL'}")


if __name__ == "__main__":
    main()
