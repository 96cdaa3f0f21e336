"""glibc's mmap threshold for a corpus run: time and peak memory of `embedlab embed minilm` per setting.

`runtime.memory.keep_large_allocations_apart(threshold)` maps every allocation of ``threshold`` bytes or more on
its own (see its docstring). Low thresholds keep the heap from fragmenting (memory flat however long the
corpus) but pay page faults for every mapped tensor; glibc's default (no call) is fastest and grows. This
script runs the same corpus with each threshold, and sentence-transformers beside them, in interleaved
rounds (so drift in the machine's speed hits every setting alike), each run a fresh process with an empty
cache, and prints the mean time, its ratio to sentence-transformers and the peak RSS.

    python benchmarks/bench_allocator.py [--size 5000] [--rounds 3] [--thresholds default,1M,4M,8M]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import ST_ENCODE, corpus_file, measured  # noqa: E402

from embedlab.models.loading import resolve_model_path  # noqa: E402
from embedlab.runtime.memo import clear  # noqa: E402

# The child sets the threshold by replacing the function's default before the CLI runs, so the code path is
# the product's own (embed_corpus calls keep_large_allocations_apart()); "default" makes the call a no-op.
EMBED_WITH_THRESHOLD = """
import runpy, sys
from embedlab.engines import runner
from embedlab.runtime.memory import keep_large_allocations_apart
from embedlab.runtime.settings import parse_size
threshold = sys.argv.pop(1)
if threshold == "default":
    runner.keep_large_allocations_apart = lambda threshold=0: None  # the name embed_corpus calls
else:
    keep_large_allocations_apart.__defaults__ = (parse_size(threshold, "threshold"),)
sys.argv[0] = "embedlab"
runpy.run_module("embedlab", run_name="__main__")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=5000, help="texts (WikiText-2 train sentences, repeated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--thresholds", default="default,1M,4M,8M", help="comma-separated: default (no call) or sizes")
    parser.add_argument("--batch-size", type=int, default=32)
    arguments = parser.parse_args()
    thresholds = arguments.thresholds.split(",")
    with tempfile.TemporaryDirectory(prefix="embedlab-allocator-") as folder:
        work = Path(folder)
        corpus = corpus_file(arguments.size, work)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in ["sentence-transformers", *thresholds]}
        for round_index in range(arguments.rounds):
            for name in runs:
                cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
                if name == "sentence-transformers":
                    command = [sys.executable, "-c", ST_ENCODE, str(resolve_model_path("minilm")), str(corpus),
                               str(work / "st.npy"), str(arguments.batch_size)]
                else:
                    output = work / f"out-{round_index}-{name}"
                    command = [sys.executable, "-c", EMBED_WITH_THRESHOLD, name, "embed", "minilm", "--input", str(corpus),
                               "--out", str(output), "--batch-size", str(arguments.batch_size), "--quiet"]
                seconds, peak = measured(command, cache)
                runs[name].append((seconds, peak))
                print(f"round {round_index + 1} {name:>22}: {seconds:6.1f} s  peak RSS {peak:.3f} GB", flush=True)
        reference = statistics.mean(seconds for seconds, _ in runs["sentence-transformers"])
        print(f"\n{arguments.size} texts, {arguments.rounds} interleaved rounds (mean time; throughput relative to "
              "sentence-transformers; mean and largest peak RSS)")
        for name, values in runs.items():
            mean_seconds = statistics.mean(seconds for seconds, _ in values)
            peaks = [peak for _, peak in values]
            print(f"{name:>22}: {mean_seconds:6.1f} s  throughput {reference / mean_seconds:.2f}x  "
                  f"peak RSS mean {statistics.mean(peaks):.3f} GB, max {max(peaks):.3f} GB")
    clear()


if __name__ == "__main__":
    main()
