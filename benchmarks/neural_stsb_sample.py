"""Indicative STS-B test correlations of neural embeddings on the first N pairs (trained vs untrained head).

A cheap stand-in until the evaluation harness runs the full "Done when 4" table: cosine similarity of
each pair vs the gold score, Spearman and Kendall tau-b (scipy), for the given specs' NeuralEmbedder
options and for all-MiniLM-L6-v2 mean pooling (sentence-transformers). Neural embeddings are cached, so
a rerun is instant.

    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/neural_stsb_sample.py --pairs 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import kendalltau, spearmanr

from embedlab.data.datasets import stsb
from embedlab.models import resolve_model_path
from embedlab.neural.family import NeuralEmbedder

VARIANTS = {
    "neural:minilm (trained head)": {},
    "neural:minilm,head=untrained": {"head": "untrained"},
}


def stsb_test_pairs(count: int) -> tuple[list[tuple[str, str]], np.ndarray]:
    test = stsb("test")
    return list(zip(test.first, test.second))[:count], np.asarray(test.scores[:count], dtype=np.float64)


def correlations(vectors_left: np.ndarray, vectors_right: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    left = vectors_left / np.linalg.norm(vectors_left, axis=1, keepdims=True)
    right = vectors_right / np.linalg.norm(vectors_right, axis=1, keepdims=True)
    cosines = (left * right).sum(axis=1)
    return float(spearmanr(cosines, gold).statistic), float(kendalltau(cosines, gold, variant="b").statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args()
    pairs, gold = stsb_test_pairs(args.pairs)
    texts = list(dict.fromkeys(text for pair in pairs for text in pair))
    index = {text: row for row, text in enumerate(texts)}
    print(f"STS-B test, first {len(pairs)} pairs ({len(texts)} distinct sentences)")
    print(f"{'method':40s} {'spearman':>9s} {'kendall-b':>9s} {'seconds':>8s}")
    for name, options in VARIANTS.items():
        started = time.perf_counter()
        vectors = NeuralEmbedder("minilm", options).embed(texts, show_progress_bar=True)
        rho, tau = correlations(vectors[[index[a] for a, _ in pairs]], vectors[[index[b] for _, b in pairs]], gold)
        print(f"{name:40s} {rho:9.4f} {tau:9.4f} {time.perf_counter() - started:8.0f}", flush=True)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(resolve_model_path("minilm")), device="cpu")
    vectors = model.encode(texts, convert_to_numpy=True)
    rho, tau = correlations(vectors[[index[a] for a, _ in pairs]], vectors[[index[b] for _, b in pairs]], gold)
    print(f"{'st:minilm (baseline)':40s} {rho:9.4f} {tau:9.4f}")


if __name__ == "__main__":
    main()
