"""One long text: time and peak memory of splitting and embedding a single text of 10,000 … 2,000,000 characters.

Each size runs in a fresh process (so the peak RSS is that size's own) with an empty private cache and no
token states kept (``runtime.token_states_uncached``: one huge text is not worth caching). Two stages are
timed: sentence splitting with packing into the model's chunks (``chunk_token_ids``, what runs before the
model), and the whole ``encode`` of the text. The text is STS-B test sentences repeated (``--kind prose``)
or one run of words with no sentence end (``--kind words``). Prints one row per size and the time per
character of the largest size over the smallest (linear time: at most 1.5).

    python benchmarks/bench_long_text.py [--spec minilm] [--sizes 10000,50000,200000,1000000,2000000] [--kind prose] [--split-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time
from embedlab.runtime.settings import token_states_uncached
import embedlab
from embedlab.data.sentences import chunk_token_ids
from embedlab.data.sts import stsb
from embedlab.models.loading import load_model

spec, size, kind, split_only = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
if kind == "prose":
    test = stsb("test")
    unit = " ".join(sentence for pair in zip(test.first, test.second) for sentence in pair) + " "
else:
    unit = "word " * 1000
text = (unit * (size // len(unit) + 1))[:size]
method = embedlab.load(spec)
model = load_model(method.parsed.model if hasattr(method.parsed, "model") else "minilm")
tokenize = lambda piece: list(model.tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"])
method.encode(["warm up"])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
chunks = chunk_token_ids(text, tokenize, model.max_length - 2)
split = time.perf_counter() - started
started = time.perf_counter()
vector = None
if not split_only:
    with token_states_uncached():
        vector = method.encode([text])
encode = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"chars": len(text), "chunks": len(chunks), "split_s": split, "encode_s": encode,
                  "peak_rss_gb": peak / 1e6, "rss_before_gb": before / 1e6, "finite": vector is None or bool((vector == vector).all())}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="minilm")
    parser.add_argument("--sizes", default="10000,50000,200000,1000000,2000000")
    parser.add_argument("--kind", choices=("prose", "words"), default="prose")
    parser.add_argument("--split-only", action="store_true", help="time the sentence splitting and chunking alone (no model run)")
    args = parser.parse_args()
    rows = []
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    print(f"{'characters':>11} {'chunks':>7} {'split s':>8} {'encode s':>9} {'µs/char':>8} {'peak RSS GB':>12}", flush=True)
    for size in (int(value) for value in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as cache:
            environment = {**os.environ, "EMBEDLAB_CACHE": cache, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
            finished = subprocess.run([sys.executable, "-c", CHILD, args.spec, str(size), args.kind, "1" if args.split_only else "0"], capture_output=True,
                                      text=True, env=environment, check=False)
        if finished.returncode != 0:
            print(f"{size:>11,} failed: {finished.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        row = json.loads(finished.stdout.strip().splitlines()[-1])
        rows.append(row)
        per_char = (row["split_s"] + row["encode_s"]) / row["chars"] * 1e6
        print(f"{row['chars']:>11,} {row['chunks']:>7,} {row['split_s']:>8.2f} {row['encode_s']:>9.2f} {per_char:>8.2f} "
              f"{row['peak_rss_gb']:>12.2f}", flush=True)
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        ratio = ((last["split_s"] + last["encode_s"]) / last["chars"]) / ((first["split_s"] + first["encode_s"]) / first["chars"])
        print(f"time per character, {last['chars']:,} over {first['chars']:,} characters: {ratio:.2f}× (linear: ≤ 1.5×); "
              f"peak RSS {max(row['peak_rss_gb'] for row in rows):.2f} GB (≤ 1.5 GB)")
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
