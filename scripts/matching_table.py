"""Spearman table of token-level matching vs pooled cosine (token-matching paper, Table 1 and Table 3).

    HF_HUB_OFFLINE=1 nice -n 10 python scripts/matching_table.py --models minilm --out docs/matching_table_minilm.md

Datasets: STS12–16 "all" (every subset of a year concatenated, one Spearman; unscored pairs skipped),
STS-B test and SICK-R test. Every row is an ordinary method spec scored by the evaluation harness's STS
task: pooled cosine is the model's default pooled method (mean of all last-layer tokens, special tokens
included, as sentence-transformers does), the others are ``match:MODEL,...`` configurations (Table 3).
All rows of a dataset run one after the other, so the encoder runs once per text and every further row
reads the cached token states.

Token states and scores go to the embedlab cache, so a rerun only reads them; a full run writes several
GB of token states there. ``--cache-root DIR`` puts every cache in DIR instead (e.g. a scratch folder
to delete afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import embedlab
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.matching.method import MatchingMethod
from embedlab.methods.base import EmbeddingMethod
from embedlab.runtime.settings import configure

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# table column -> STS task dataset
DATASETS = {"STS12": "sts12", "STS13": "sts13", "STS14": "sts14", "STS15": "sts15", "STS16": "sts16",
            "STS-B": "stsb", "SICK-R": "sick-r"}
# (label, method spec with {model} for the model name)
ROWS: list[tuple[str, str]] = [
    ("pooled cosine (mean, = sentence-transformers)", "{model}"),
    ("match 2max-2nd, no weights", "match:{model},weights=none"),
    ("match 2max-2nd, idf^W weights", "match:{model},weights=idf"),
    ("match 2max-2nd, learned weights (the paper's model)", "match:{model}"),
    ("ablation: max, learned weights", "match:{model},score=max"),
    ("ablation: max-2nd, learned weights", "match:{model},score=max-2nd"),
    ("ablation: max, idf, F1 (BERTScore)", "match:{model},mode=bertscore"),
    ("ablation: 2max-2nd, learned, raw dot product", "match:{model},normalise-tokens=no"),
    ("ablation: 2max-2nd, learned, with [CLS]/[SEP]", "match:{model},special=include"),
]


def row_methods(model: str) -> dict[str, EmbeddingMethod]:
    """Each row's method; a row whose learned weights do not exist for this model is left out (n/a)."""
    methods = {}
    for label, spec in ROWS:
        method = embedlab.load(spec.format(model=model))
        if isinstance(method, MatchingMethod):
            try:
                method.vocabulary_weights()
            except FileNotFoundError as error:
                print(f"{model}: skipping {label!r}: {error}", file=sys.stderr)
                continue
        methods[label] = method
    return methods


def overall_spearman(records: list) -> float:
    """Spearman × 100 over the whole dataset: the "all" record of an STS year, else the one test split."""
    spearman = {record.subset: record.value for record in records if record.metric == "spearman"}
    return 100 * (spearman["all"] if "all" in spearman else next(iter(spearman.values())))


def evaluate_model(model: str, names: list[str]) -> dict[str, dict[str, float]]:
    """{row label: {dataset: Spearman × 100}} for one model; prints one JSON line per dataset."""
    methods = row_methods(model)
    results: dict[str, dict[str, float]] = {label: {} for label, _ in ROWS}
    for name in names:
        started = time.time()
        [task] = parse_tasks([f"sts:{DATASETS[name]}"])
        for label, method in methods.items():
            run = evaluate([method], [task], log=lambda message: None)
            results[label][name] = overall_spearman(run.records)
        print(f"{model} {name}: {time.time() - started:.0f}s", file=sys.stderr, flush=True)
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
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--cache-root", type=Path, help="keep every cache (token states, scores) here instead of the embedlab cache")
    parser.add_argument("--out", help="also write the markdown tables here")
    args = parser.parse_args()
    if args.cache_root is not None:
        configure(cache_root=args.cache_root)
    tables = []
    for model in args.models:
        results = evaluate_model(model, args.datasets)
        tables.append(markdown(model, results, args.datasets))
        print(tables[-1] + "\n", flush=True)
    if args.out:
        Path(args.out).write_text("\n\n".join(tables) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
