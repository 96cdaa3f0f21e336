"""Exact top-k search against faiss, and the search's memory at corpus scale.

In one run, on the same normalised vectors and the same thread count:

* embedlab's exact blocked search (``embedlab.evaluation.search.top_k``) against ``faiss.IndexFlatIP`` (exact),
  100,000 documents × 1,000 queries, k = 100: the ratio of their times (target ≥ 0.8×) and whether the
  two return the same documents;
* faiss's approximate HNSW index: build and search time, and its recall@k against the exact result;
* peak RSS of a separate process that searches 1,000,000 synthetic 384-d documents streamed in blocks (the
  vectors are generated block by block, never held whole), above the same process before the search.

    python benchmarks/bench_retrieval.py [--documents 100000] [--queries 1000] [--k 100] [--threads 2]
                                         [--scale-documents 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from _common import cpu_description


def unit(rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def synthetic(count: int, dim: int, seed: int) -> np.ndarray:
    """Clustered unit vectors (a mixture of 200 directions), so that neighbours mean something for HNSW."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, dim)).astype(np.float32)
    return unit(centres[rng.integers(0, 200, count)] + 0.6 * rng.standard_normal((count, dim)).astype(np.float32))


def timed(function, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def compare(documents: int, queries: int, k: int, repeats: int) -> dict:
    import faiss

    from embedlab.evaluation import search

    corpus, asked = synthetic(documents, 384, 0), synthetic(queries, 384, 1)
    priority = np.arange(documents)
    blocks = lambda: (corpus[start:start + search.DOC_BLOCK] for start in range(0, documents, search.DOC_BLOCK))
    ours_seconds, (ours, _) = timed(lambda: search.top_k(asked, blocks(), k, priority), repeats)
    flat = faiss.IndexFlatIP(384)
    flat.add(corpus)
    flat_seconds, (_, theirs) = timed(lambda: flat.search(asked, k), repeats)
    same = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ours, theirs)]))
    hnsw = faiss.IndexHNSWFlat(384, 32, faiss.METRIC_INNER_PRODUCT)
    started = time.perf_counter()
    hnsw.add(corpus)
    build = time.perf_counter() - started
    hnsw.hnsw.efSearch = max(64, 2 * k)
    hnsw_seconds, (_, approximate) = timed(lambda: hnsw.search(asked, k), repeats)
    recall = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ours, approximate)]))
    return {"documents": documents, "queries": queries, "k": k, "embedlab_exact_s": ours_seconds,
            "faiss_flat_s": flat_seconds, "ratio_faiss_over_embedlab": flat_seconds / ours_seconds,
            "same_documents_as_faiss_flat": same, "hnsw_build_s": build, "hnsw_search_s": hnsw_seconds,
            "hnsw_recall_at_k": recall}


def scale_child(documents: int, queries: int, k: int) -> None:
    """Runs in its own process: RSS before and after searching ``documents`` streamed in blocks."""
    from embedlab.evaluation import search

    def rss_kb() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))

    asked = synthetic(queries, 384, 1)
    before = rss_kb()
    block = search.DOC_BLOCK
    blocks = (synthetic(min(block, documents - start), 384, 2 + start // block) for start in range(0, documents, block))
    started = time.perf_counter()
    search.top_k(asked, blocks, k, np.arange(documents))
    print(json.dumps({"documents": documents, "queries": queries, "k": k, "seconds": time.perf_counter() - started,
                      "peak_rss_before_mb": before / 1024, "peak_rss_mb": rss_kb() / 1024,
                      "vectors_mb": documents * 384 * 4 / 2**20}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--scale-documents", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import faiss
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    with threadpool_limits(args.threads):
        if args.scale_child:
            scale_child(args.scale_documents, args.queries, args.k)
            return
        print(f"CPU: {cpu_description()}; threads {args.threads}; load average {os.getloadavg()[0]:.2f}")
        result = compare(args.documents, args.queries, args.k, args.repeats)
    print(json.dumps(result))
    print(f"exact search: embedlab {result['embedlab_exact_s']:.3f} s, faiss IndexFlatIP {result['faiss_flat_s']:.3f} s: "
          f"embedlab runs at {result['ratio_faiss_over_embedlab']:.2f}x faiss's speed (target >= 0.8x); "
          f"same documents {result['same_documents_as_faiss_flat']:.4f}")
    print(f"faiss HNSW (M 32, efSearch {max(64, 2 * args.k)}): build {result['hnsw_build_s']:.1f} s, search "
          f"{result['hnsw_search_s']:.3f} s, recall@{args.k} against exact {result['hnsw_recall_at_k']:.4f}")
    child = subprocess.run([sys.executable, __file__, "--scale-child", "--scale-documents", str(args.scale_documents),
                            "--queries", str(args.queries), "--k", str(args.k), "--threads", str(args.threads)],
                           capture_output=True, text=True, check=True)
    scale = json.loads(child.stdout.strip().splitlines()[-1])
    print(json.dumps(scale))
    print(f"{scale['documents']:,} documents streamed: {scale['seconds']:.1f} s, peak RSS {scale['peak_rss_mb']:.0f} MB "
          f"({scale['peak_rss_mb'] - scale['peak_rss_before_mb']:.0f} MB above the process before the search; the "
          f"vectors themselves would be {scale['vectors_mb']:.0f} MB); load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
