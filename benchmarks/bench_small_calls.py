"""Small `encode` calls in-process: `embedlab.load("minilm:post=normalize").encode` against sentence-transformers'
`SentenceTransformer("all-MiniLM-L6-v2").encode` on the same seeded stream of requests, side by side.

The stream: `--requests` (50) requests of 1–16 distinct STS-B sentences drawn with one seeded generator (the
request stream of benchmarks/bench_serve.py, one client), each one `encode` call, as a search box or a RAG
query calls a model. Both sides run `--rounds` times, interleaved (embedlab, sentence-transformers,
sentence-transformers, embedlab, ...), so both see the same load of a shared machine; the ratio is taken per
round (sentence-transformers' seconds / embedlab's: > 1 means embedlab is faster) and its median printed with
every round's. Neither side stores token states (as the server). Checked: every vector within 1e-6 of
sentence-transformers' (both unit vectors in float32). `--profile` prints cProfile's top functions of one
embedlab pass instead.

    python benchmarks/bench_small_calls.py [--requests 50] [--rounds 5] [--seed 0] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from bench_serve import cpu_model, request_stream, stsb_sentences
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.models.loading import resolve_model_path
from embedlab.runtime.settings import token_states_uncached

SPEC = "minilm:post=normalize"


def run(encode, requests: list[list[str]]) -> tuple[float, list[np.ndarray]]:
    start = time.perf_counter()
    vectors = [encode(texts) for texts in requests]
    return time.perf_counter() - start, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    print(f"cpu: {cpu_model()} ({os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads); "
          f"load average at start: {os.getloadavg()}")
    requests = request_stream(stsb_sentences(), 1, args.requests, args.seed)[0]
    method = embedlab.load(SPEC)
    model = SentenceTransformer(str(resolve_model_path("minilm")), device="cpu")

    def ours(texts: list[str]) -> np.ndarray:
        with token_states_uncached():
            return method.encode(texts)

    def theirs(texts: list[str]) -> np.ndarray:
        return model.encode(texts, convert_to_numpy=True)

    ours(["warm up the model"]), theirs(["warm up the model"])
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(run, ours, requests)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
        return
    ratios, ours_s, theirs_s = [], [], []
    for round_index in range(args.rounds):
        sides = [(ours, ours_s), (theirs, theirs_s)][:: 1 if round_index % 2 == 0 else -1]
        for encode, seconds in sides:
            elapsed, vectors = run(encode, requests)
            seconds.append(elapsed)
            if encode is ours:
                ours_vectors = vectors
            else:
                theirs_vectors = vectors
        ratios.append(theirs_s[-1] / ours_s[-1])
    texts = sum(len(request) for request in requests)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(ours_vectors, theirs_vectors))
    print(f"{args.requests} requests, {texts} texts, {args.rounds} interleaved rounds")
    print(f"embedlab {SPEC}: " + ", ".join(f"{s:.2f}" for s in ours_s) + f" s (median {np.median(ours_s):.2f})")
    print("sentence-transformers: " + ", ".join(f"{s:.2f}" for s in theirs_s) + f" s (median {np.median(theirs_s):.2f})")
    print("ratio sentence-transformers / embedlab per round: " + ", ".join(f"{r:.2f}" for r in ratios)
          + f"; median {np.median(ratios):.2f}x (goal >= 1.0)")
    print(f"largest |embedlab - sentence-transformers|: {worst:.2e} (must be <= 1e-6); load average at end: {os.getloadavg()}")
    if not worst <= 1e-6:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
