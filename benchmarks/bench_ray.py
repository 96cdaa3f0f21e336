"""Ray engine vs local engine on the same cores: ``embed_corpus`` into a shard folder, both from an empty cache.

Local Ray with ``--workers`` actors (one CPU each) against the local engine (this process, torch using the
same number of threads), on WikiText-2 train sentences: ``--texts`` for ``minilm`` (target: Ray ≥ 0.85× as
fast: its overhead stays small) and ``--neural-texts`` for ``neural:minilm`` (target ≥ 0.95×). Ray is
started before the clock (as a cluster would already be running); the Ray time includes starting the
actors and loading the model in each. Prints both times, the ratio, and how far the vectors differ.

    python benchmarks/bench_ray.py [--texts 20000] [--neural-texts 100] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np
import ray
import torch
from _common import fresh_cache

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.engines.runner import embed_corpus
from embedlab.engines.shards import read_shards


def timed_run(spec: str, source: Path, out: Path, engine: str, workers: int) -> float:
    folder = fresh_cache()  # nothing cached: both engines compute every vector
    start = time.perf_counter()
    embed_corpus(spec, source, out, engine=engine, workers=workers, progress=False)
    elapsed = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return elapsed


def compare(spec: str, texts: list[str], workers: int, scratch: Path, target: float) -> None:
    source = scratch / f"{spec.replace(':', '_')}.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    local_seconds = timed_run(spec, source, scratch / f"{source.stem}-local", "local", workers)
    ray_seconds = timed_run(spec, source, scratch / f"{source.stem}-ray", "ray", workers)
    local_vectors = read_shards(scratch / f"{source.stem}-local")[1]
    ray_vectors = read_shards(scratch / f"{source.stem}-ray")[1]
    cosines = np.einsum("ij,ij->i", local_vectors, ray_vectors) / (
        np.linalg.norm(local_vectors, axis=1) * np.linalg.norm(ray_vectors, axis=1))
    ratio = local_seconds / ray_seconds
    print(f"{spec:>14} {len(texts):>7,} texts | local {local_seconds:8.1f} s ({len(texts) / local_seconds:7.1f} texts/s) | "
          f"ray {ray_seconds:8.1f} s ({len(texts) / ray_seconds:7.1f} texts/s) | ray speed {ratio:.2f}x local "
          f"(target >= {target}x: {'met' if ratio >= target else 'NOT met'}) | max |diff| "
          f"{np.abs(local_vectors - ray_vectors).max():.2e}, min cosine {cosines.min():.7f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=20_000, help="texts for minilm")
    parser.add_argument("--neural-texts", type=int, default=100, help="texts for neural:minilm")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors = torch threads of the local engine")
    args = parser.parse_args()

    torch.set_num_threads(args.workers)
    sentences = wikitext2_sentences("train", min_chars=10)
    texts = [sentences[index % len(sentences)] for index in range(args.texts)]
    start = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="WARNING")
    print(f"ray.init: {time.perf_counter() - start:.1f} s (not counted); {os.cpu_count()} CPUs, {args.workers} workers", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="embedlab-bench-ray-"))
    try:
        compare("minilm", texts, args.workers, scratch, 0.85)
        compare("neural:minilm", texts[: args.neural_texts], args.workers, scratch, 0.95)
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
