"""BERTScore time: embedlab.bertscore beside the bert-score package's score() on the same pairs.

The 1,379 STS-B test pairs (sentence 1 = candidate, sentence 2 = reference) with all-MiniLM-L6-v2, the
same layer and idf setting on both sides. embedlab runs from an empty token-state cache (its model
already loaded); the package's score() is timed as a user calls it, which loads its model each call, so
that load is timed on its own and also taken off (the "package, model run" figure). Runs alternate so
both meet the same machine noise; medians, the speed-up (package time / embedlab time; target ≥ 1.0×),
CPU time of this process and the largest P/R/F1 difference between the two are printed.

``--dtype bf16`` (or fp16, int8) runs embedlab's model in that compute and adds an fp32 embedlab run to each
repeat, interleaved: the ratio of the two and the largest F1 difference between them are printed too.

    python benchmarks/bench_bertscore.py [--repeats 3] [--idf] [--layer 6] [--pairs 1379] [--dtype fp32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from _common import fresh_cache, sts_test_pairs

import embedlab
from embedlab.models.loading import load_model, resolve_model_path
from embedlab.models.precision import COMPUTES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--idf", action="store_true")
    parser.add_argument("--layer", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=None, help="first N pairs only (default all 1,379)")
    parser.add_argument("--dtype", choices=COMPUTES, default="fp32", help="compute of embedlab's model (and an fp32 run beside it)")
    args = parser.parse_args()
    try:
        from bert_score import score as package_score
        from bert_score.utils import get_model, get_tokenizer
    except ImportError:
        raise SystemExit("bench_bertscore needs the bert-score package (pip install 'embedlab[test]')") from None

    pairs = sts_test_pairs(args.pairs)
    cands, refs = [a for a, _ in pairs], [b for _, b in pairs]
    path = str(resolve_model_path("minilm"))
    options = dict(model_type=path, num_layers=args.layer, idf=args.idf, batch_size=args.batch_size, nthreads=0)
    package_score(cands[:8], refs[:8], **options)  # first imports and file reads, before timing
    ours_times, package_times, load_times, ours_cpu, package_cpu, fp32_times = [], [], [], [], [], []
    for _ in range(args.repeats):
        folder = fresh_cache()
        start, cpu = time.perf_counter(), time.process_time()
        ours = embedlab.bertscore(cands, refs, model=load_model("minilm", compute=args.dtype), layer=args.layer, idf=args.idf,
                                  batch_size=args.batch_size)
        ours_times.append(time.perf_counter() - start)
        ours_cpu.append(time.process_time() - cpu)
        shutil.rmtree(folder, ignore_errors=True)
        if args.dtype != "fp32":
            fp32_run(cands, refs, args, ours, fp32_times)

        start, cpu = time.perf_counter(), time.process_time()
        theirs = package_score(cands, refs, **options)
        package_times.append(time.perf_counter() - start)
        package_cpu.append(time.process_time() - cpu)
        start = time.perf_counter()
        get_tokenizer(path), get_model(path, args.layer)  # what each score() call loads
        load_times.append(time.perf_counter() - start)
        difference = max(float(np.abs(mine - other.numpy()).max()) for mine, other in zip(ours, theirs))
        print(f"repeat: embedlab {ours_times[-1]:.2f} s, package {package_times[-1]:.2f} s "
              f"(its model load {load_times[-1]:.2f} s), largest P/R/F1 difference {difference:.1e}", flush=True)
    ours_median, package_median, load_median = (statistics.median(values) for values in (ours_times, package_times, load_times))
    print(f"STS-B test: {len(pairs)} pairs, minilm layer {args.layer}, idf {'on' if args.idf else 'off'}, "
          f"batch size {args.batch_size}, repeats {args.repeats}")
    print(f"embedlab.bertscore, fresh cache: median {ours_median:.2f} s  ({', '.join(f'{t:.2f}' for t in ours_times)})")
    print(f"bert_score.score:                median {package_median:.2f} s  ({', '.join(f'{t:.2f}' for t in package_times)})")
    print(f"package, model run (less its {load_median:.2f} s load): {package_median - load_median:.2f} s")
    print(f"speed-up: {package_median / ours_median:.2f}x end to end, {(package_median - load_median) / ours_median:.2f}x "
          "without the package's model load (target >= 1.0x)")
    print(f"CPU time: embedlab {statistics.median(ours_cpu):.1f} s, package {statistics.median(package_cpu):.1f} s")
    if fp32_times:
        print(f"embedlab {args.dtype} vs embedlab fp32 (interleaved): median {ours_median:.2f} s vs "
              f"{statistics.median(fp32_times):.2f} s, {statistics.median(fp32_times) / ours_median:.2f}x")


def fp32_run(cands: list[str], refs: list[str], args: argparse.Namespace, lower: tuple, times: list[float]) -> None:
    """embedlab in fp32 on the same pairs from an empty cache, timed; prints its largest P/R/F1 difference to ``lower``."""
    folder = fresh_cache()
    start = time.perf_counter()
    exact = embedlab.bertscore(cands, refs, model="minilm", layer=args.layer, idf=args.idf, batch_size=args.batch_size)
    times.append(time.perf_counter() - start)
    shutil.rmtree(folder, ignore_errors=True)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(lower, exact))
    print(f"  embedlab fp32 {times[-1]:.2f} s; largest P/R/F1 difference {args.dtype} vs fp32 {difference:.1e}", flush=True)


if __name__ == "__main__":
    main()
