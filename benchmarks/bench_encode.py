"""`minilm` mean pooling vs sentence-transformers' encode on the 2,758 STS-B test sentences.

Same model, same batch size, both computing from scratch (embedlab with an empty token-state cache,
so its time includes computing and writing every layer's token states). Runs alternate to share
machine noise; the ratio of median times is printed. Target: embedlab ≥ 0.95× as fast.

    python benchmarks/bench_encode.py [--repeats 3] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from _common import fresh_cache, sts_test_sentences
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.models import resolve_model_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    sentences = sts_test_sentences()
    st_model = SentenceTransformer(str(resolve_model_path("minilm")))
    embedlab.load("minilm").encode(sentences[:64])  # load both models before timing
    st_model.encode(sentences[:64])
    ours_times, st_times = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        reference = st_model.encode(sentences, batch_size=args.batch_size)
        st_times.append(time.perf_counter() - start)

        folder = fresh_cache()
        start = time.perf_counter()
        ours = embedlab.load("minilm").encode(sentences, batch_size=args.batch_size, normalize_embeddings=True)
        ours_times.append(time.perf_counter() - start)
        shutil.rmtree(folder, ignore_errors=True)
    agreement = float(np.einsum("ij,ij->i", ours, reference).min())
    st_median, ours_median = statistics.median(st_times), statistics.median(ours_times)
    print(f"sentences: {len(sentences)}, batch size {args.batch_size}, repeats {args.repeats}")
    print(f"sentence-transformers encode: median {st_median:.2f} s  ({', '.join(f'{t:.2f}' for t in st_times)})")
    print(f"embedlab minilm (fresh cache): median {ours_median:.2f} s  ({', '.join(f'{t:.2f}' for t in ours_times)})")
    print(f"speed ratio embedlab/sentence-transformers: {st_median / ours_median:.3f}x (target >= 0.95)")
    print(f"minimum cosine to sentence-transformers: {agreement:.6f}")


if __name__ == "__main__":
    main()
