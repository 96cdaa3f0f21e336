"""Inspect learned token weights beside idf^W: top and bottom tokens, and a few chosen words.

    HF_HUB_OFFLINE=1 python scripts/inspect_token_weights.py [--model minilm] [--min-count 50]

Only tokens seen at least ``--min-count`` times in WikiText-2 train are ranked (rarer tokens barely
moved from their initial weight 1). Weights are shown divided by their median over those tokens,
since only ratios matter in a weighted average.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from scipy.stats import spearmanr

from embedlab.matching.method import load_learned_weights
from embedlab.models.loading import load_model
from embedlab.pooling.weights import reference_token_statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = ("not", "no", "never", "without", "the", "a", "is", "with", "and", "of", ",", ".", "man", "woman", "guitar", "1", "2009", "play")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--min-count", type=int, default=50)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    loaded = load_model(args.model)
    tokenizer = loaded.tokenizer
    weights = load_learned_weights(loaded)
    idf, counts = reference_token_statistics(tokenizer)
    ranked = np.flatnonzero(counts >= args.min_count)
    ranked = ranked[~np.isin(ranked, tokenizer.all_special_ids)]
    scale = float(np.median(weights[ranked]))
    order = ranked[np.argsort(-weights[ranked], kind="stable")]

    def show(ids: np.ndarray) -> str:
        return ", ".join(f"{tokenizer.convert_ids_to_tokens(int(i))} {weights[i] / scale:.2f}" for i in ids)

    print(f"{len(ranked)} tokens seen >= {args.min_count} times; weights / median ({scale:.3f})")
    print(f"range over them: {weights[ranked].min() / scale:.2f} .. {weights[ranked].max() / scale:.2f}")
    print(f"Spearman(learned weight, idf^W) over them: {spearmanr(weights[ranked], idf[ranked]).statistic:.3f}")
    print(f"top {args.top}: {show(order[: args.top])}")
    print(f"bottom {args.top}: {show(order[-args.top :][::-1])}")
    ids = tokenizer.convert_tokens_to_ids(list(WORDS))
    print("chosen words (learned / median, idf^W): " + ", ".join(f"{w} {weights[i] / scale:.2f} ({idf[i]:.1f})" for w, i in zip(WORDS, ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
