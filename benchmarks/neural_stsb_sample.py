"""Indicative STS-B test correlations of neural embeddings on the first N pairs (trained vs untrained head).

A quick look at a sample of pairs; the full STS-B numbers come from the evaluation harness. For each
spec: cosine similarity of each pair vs the gold score, Spearman and Kendall tau-b (scipy), next to
all-MiniLM-L6-v2's own sentence-transformers encoding. Neural embeddings are cached, so a rerun is instant.

    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/neural_stsb_sample.py --pairs 200
    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/neural_stsb_sample.py --pairs 100 --spec neural:minilm --spec neural:/tmp/smollm2-hf
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import kendalltau, spearmanr

import embedlab
from embedlab.data.sts import stsb

SPECS = {
    "neural:minilm (trained head)": "neural:minilm",
    "neural:minilm,head=untrained": "neural:minilm,head=untrained",
    "st:minilm (baseline)": "st:minilm",
}


def stsb_test_pairs(count: int) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The first ``count`` STS-B test pairs and their gold scores."""
    test = stsb("test")
    return list(zip(test.first, test.second))[:count], np.asarray(test.scores[:count], dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--spec", action="append", help="a method spec to measure instead of the default set (repeatable)")
    args = parser.parse_args()
    specs = {spec: spec for spec in args.spec} if args.spec else SPECS
    pairs, gold = stsb_test_pairs(args.pairs)
    distinct = len(dict.fromkeys(text for pair in pairs for text in pair))
    print(f"STS-B test, first {len(pairs)} pairs ({distinct} distinct sentences)")
    print(f"{'method':40s} {'spearman':>9s} {'kendall-b':>9s} {'seconds':>8s}")
    for name, spec in specs.items():
        started = time.perf_counter()
        cosines = embedlab.load(spec).similarity_pairs(pairs, show_progress_bar=True)
        rho = float(spearmanr(cosines, gold).statistic)
        tau = float(kendalltau(cosines, gold, variant="b").statistic)
        print(f"{name:40s} {rho:9.4f} {tau:9.4f} {time.perf_counter() - started:8.0f}  (load average {open('/proc/loadavg').read().split()[0]})", flush=True)


if __name__ == "__main__":
    main()
