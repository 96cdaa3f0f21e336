"""`smollm2` encode throughput against a plain transformers forward loop, same texts and batch size.

The plain loop is what a user would write: tokenizer(batch, padding=True), one forward pass, the mean of
the last hidden layer over the attention mask (ALIGN-SIM's LLM protocol, ``smollm2:pool=mean``). embedlab
runs from an empty token-state cache (its time includes writing the states), with the dequantised model
folder shared. Runs alternate to share machine noise; the ratio of median times is printed (target ≥ 0.95×).

    python benchmarks/bench_llm.py [--sentences 512] [--repeats 3] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from _common import sts_test_sentences

import embedlab
from embedlab import runtime
from embedlab.models import load_model


def plain_mean(model, tokenizer, sentences: list[str], batch_size: int) -> np.ndarray:
    """The user's loop: padded batches in file order, masked mean of the last hidden layer."""
    vectors = []
    with torch.inference_mode():
        for start in range(0, len(sentences), batch_size):
            inputs = tokenizer(sentences[start : start + batch_size], padding=True, return_tensors="pt")
            hidden = model(**inputs).last_hidden_state
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors.append(((hidden * mask).sum(1) / mask.sum(1)).numpy())
    return np.concatenate(vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    sentences = sts_test_sentences()[: args.sentences]
    machine_models = runtime.cache_root() / "models"
    loaded = load_model("smollm2")  # converts the GGUF once into the machine's cache
    model, tokenizer = loaded.model, loaded.tokenizer
    embedlab.load("smollm2").encode(sentences[:8])
    plain_mean(model, tokenizer, sentences[:8], args.batch_size)
    ours_times, plain_times = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        reference = plain_mean(model, tokenizer, sentences, args.batch_size)
        plain_times.append(time.perf_counter() - start)

        folder = tempfile.mkdtemp(prefix="embedlab-bench-llm-")
        os.symlink(machine_models, os.path.join(folder, "models"))  # the dequantised folder, not the token states
        runtime.configure(cache_root=folder)
        embedlab.load("smollm2").model  # noqa: B018 - nothing loaded lazily inside the timed region
        load_model("smollm2")
        start = time.perf_counter()
        ours = embedlab.load("smollm2:pool=mean").encode(sentences, batch_size=args.batch_size)
        ours_times.append(time.perf_counter() - start)
        shutil.rmtree(folder, ignore_errors=True)
    difference = float(np.abs(ours - reference).max())
    plain_median, ours_median = statistics.median(plain_times), statistics.median(ours_times)
    print(f"smollm2, {len(sentences)} STS-B test sentences, batch size {args.batch_size}, repeats {args.repeats}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"plain transformers loop: median {plain_median:.2f} s  ({', '.join(f'{t:.2f}' for t in plain_times)})")
    print(f"embedlab smollm2 (fresh cache): median {ours_median:.2f} s  ({', '.join(f'{t:.2f}' for t in ours_times)})")
    print(f"speed ratio embedlab/plain: {plain_median / ours_median:.3f}x (target >= 0.95)")
    print(f"max abs difference of the vectors: {difference:.2e}")


if __name__ == "__main__":
    main()
