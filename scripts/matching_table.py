"""Spearman table of token-level matching vs pooled cosine (token-matching paper, Table 1 and Table 3).

    HF_HUB_OFFLINE=1 nice -n 10 python scripts/matching_table.py --models minilm --out docs/matching_table_minilm.md

Datasets: STS12–16 "all" (every subset of a year concatenated, one Spearman; unscored pairs skipped),
STS-B test and SICK-R test. For each model the token states are computed once per dataset (last layer)
and every row is scored from them: pooled cosine (mean of all tokens, special tokens included, as
sentence-transformers does), token matching with none / idf / learned weights, and the Table 3 rows.

Token states are not written to the disk cache (a full run would need several GB); pass --disk-cache
to keep them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import embedlab
from embedlab.pooling.aggregation import token_weights

STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
Pairs = list[tuple[str, str]]

# (label, match spec options or None for pooled cosine)
ROWS: list[tuple[str, str | None]] = [
    ("pooled cosine (mean, = sentence-transformers)", None),
    ("match 2max-2nd, no weights", "weights=none"),
    ("match 2max-2nd, idf^W weights", "weights=idf"),
    ("match 2max-2nd, learned weights (the paper's model)", ""),
    ("ablation: max, learned weights", "score=max"),
    ("ablation: max-2nd, learned weights", "score=max-2nd"),
    ("ablation: max, idf, F1 (BERTScore)", "mode=bertscore"),
    ("ablation: 2max-2nd, learned, raw dot product", "normalise-tokens=no"),
    ("ablation: 2max-2nd, learned, with [CLS]/[SEP]", "special=include"),
]


def _scored(parts: list) -> tuple[Pairs, np.ndarray]:
    """Pairs and gold scores of one or more ScoredPairs (an STS year's subsets concatenated: "all")."""
    pairs = [pair for part in parts for pair in zip(part.first, part.second)]
    return pairs, np.concatenate([part.scores for part in parts])


def datasets() -> dict[str, tuple[Pairs, np.ndarray]]:
    from embedlab.data import datasets as shared

    found = {year: _scored(shared.sts_year(year)) for year in STS_YEARS}
    found["STS-B"] = _scored([shared.stsb("test")])
    found["SICK-R"] = _scored([shared.sick_relatedness("test")])
    return found


def evaluate_model(model: str, data: dict[str, tuple[Pairs, np.ndarray]], chunk: int, disk_cache: bool) -> dict[str, dict[str, float]]:
    from embedlab.tokens import states as token_states
    from embedlab.models import load_model

    loaded = load_model(model)
    if not disk_cache:
        token_states._STORES[(str(loaded.path), loaded.fingerprint)] = token_states.TokenStateStore(loaded, use_disk_cache=False, memory_limit_bytes=1 << 28)
    methods = {label: (embedlab.load(f"match:{model}" + (f",{options}" if options else "")) if options is not None else None) for label, options in ROWS}
    encoder = next(method for method in methods.values() if method is not None).encoder
    results: dict[str, dict[str, float]] = {label: {} for label, _ in ROWS}
    for label, method in list(methods.items()):
        try:
            if method is not None:
                method.vocabulary_weights()
        except FileNotFoundError as error:  # no learned weights for this model: the row reads n/a
            print(f"{model}: skipping {label!r}: {error}", file=sys.stderr)
            del methods[label]
    for name, (pairs, gold) in data.items():
        started = time.time()
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        index = {text: row for row, text in enumerate(unique)}
        indices = [(index[a], index[b]) for a, b in pairs]
        sides: dict[str, list] = {label: [] for label in methods}
        for start in range(0, len(unique), chunk):
            flat, matrix = encoder.token_vectors(unique[start : start + chunk], batch_size=32, show_progress_bar=False)
            for label, method in methods.items():
                if method is None:  # pooled cosine from the same token vectors: mean over all tokens
                    keep = np.ones(len(flat.token_ids), dtype=bool)
                    pooled = flat.per_text_sum(matrix * token_weights(flat, keep, None)[:, None])
                    sides[label].extend(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
                else:
                    sides[label].extend(method.sides(flat, matrix))
        for label, method in methods.items():
            if method is None:
                vectors = np.asarray(sides[label])
                predicted = np.einsum("ij,ij->i", vectors[[a for a, _ in indices]], vectors[[b for _, b in indices]])
            else:
                predicted = method.score_sides(sides[label], indices)
            results[label][name] = float(spearmanr(gold, predicted).statistic) * 100
        print(f"{model} {name}: {len(pairs)} pairs, {len(unique)} texts, {time.time() - started:.0f}s", file=sys.stderr, flush=True)
        print(json.dumps({"model": model, "dataset": name, "spearman": {label: values[name] for label, values in results.items() if name in values}}), flush=True)
    return results


def markdown(model: str, results: dict[str, dict[str, float]], names: list[str]) -> str:
    lines = [f"**{model}** (Spearman × 100)", "", "| method | " + " | ".join(names) + " | avg |", "|---" * (len(names) + 2) + "|"]
    for label, values in results.items():
        if not values:
            lines.append(f"| {label} | " + " | ".join("n/a" for _ in names) + " | n/a |")
            continue
        cells = [values[name] for name in names]
        lines.append(f"| {label} | " + " | ".join(f"{cell:.2f}" for cell in cells) + f" | {np.mean(cells):.2f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["minilm"])
    parser.add_argument("--datasets", nargs="+", help="subset of STS12..STS16, STS-B, SICK-R")
    parser.add_argument("--chunk", type=int, default=2000, help="texts per token-state pass (bounds memory)")
    parser.add_argument("--disk-cache", action="store_true")
    parser.add_argument("--out", help="also write the markdown tables here")
    args = parser.parse_args()
    data = datasets()
    if args.datasets:
        data = {name: data[name] for name in args.datasets}
    tables = []
    for model in args.models:
        results = evaluate_model(model, data, args.chunk, args.disk_cache)
        tables.append(markdown(model, results, list(data)))
        print(tables[-1] + "\n", flush=True)
    if args.out:
        Path(args.out).write_text("\n\n".join(tables) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
