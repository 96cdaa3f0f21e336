"""20 pooling / weighting / post-processing configurations over the same texts vs one configuration.

Both start from an empty token-state cache: one configuration pays for the model run; twenty pay
for it once and then pool the cached states nineteen more times. Target: ≤ 1.5× the time of one.
One configuration runs as any user's encode does (only the layer it reads is kept); the twenty ask
for what a grid needs explicitly: every layer kept (``cache_layers="all"``) and a memory cache large
enough for the layers they read (``GRID_MEMORY``), so no configuration runs the model again.
Reference statistics (idf^W, frequent tokens) are built once per machine before timing; both sides share them.

    python benchmarks/bench_configurations.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import fresh_cache, sts_test_sentences

import embedlab
from embedlab.pooling.weights import reference_token_statistics

GRID_MEMORY = "2G"

CONFIGURATIONS = [
    "minilm",
    "minilm:layers=1+last",
    "minilm:layers=1+2+last",
    "minilm:layers=0",
    "minilm:layers=-1",
    "minilm:pool=cls",
    "minilm:pool=max",
    "minilm:special=exclude",
    "minilm:weights=idf-target",
    "minilm:weights=idf-ref",
    "minilm:filter=biases",
    "minilm:layers=1+last,filter=biases,post=normalize",
    "minilm:weights=idf-target,post=quantile-u",
    "minilm:layers=1+last,weights=idf-ref,post=zscore",
    "minilm:post=quantile-u",
    "minilm:post=zscore",
    "minilm:post=whiten",
    "minilm:post=abtt-2",
    "minilm:post=normalize",
    "minilm:layers=1+last,weights=idf-target,filter=punct+subword,post=abtt-2+normalize",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    assert len(CONFIGURATIONS) == 20
    sentences = sts_test_sentences()
    reference_token_statistics(embedlab.load("minilm").model.tokenizer)  # built once per machine, shared below
    one_times, twenty_times = [], []
    for _ in range(args.repeats):
        folder = fresh_cache()
        start = time.perf_counter()
        embedlab.load(CONFIGURATIONS[0]).encode(sentences)
        one_times.append(time.perf_counter() - start)
        shutil.rmtree(folder, ignore_errors=True)

        folder = fresh_cache(cache_layers="all", memory_cache_bytes=GRID_MEMORY)
        start = time.perf_counter()
        for spec in CONFIGURATIONS:
            embedlab.load(spec).encode(sentences)
        twenty_times.append(time.perf_counter() - start)
        shutil.rmtree(folder, ignore_errors=True)
    one, twenty = statistics.median(one_times), statistics.median(twenty_times)
    print(f"sentences: {len(sentences)} (STS-B test), repeats {args.repeats}")
    print(f"one configuration (model run + pooling, its layer kept): median {one:.2f} s")
    print(f"twenty configurations (one model run keeping every layer, twenty poolings; memory cache {GRID_MEMORY}): median {twenty:.2f} s")
    print(f"ratio twenty/one: {twenty / one:.3f} (target <= 1.5)")


if __name__ == "__main__":
    main()
