"""`smollm2` encode throughput against a plain transformers forward loop, same texts and batch size.

The plain loop is what a user would write: tokenizer(batch, padding=True), one forward pass, the mean of
the last hidden layer over the attention mask (ALIGN-SIM's LLM protocol, ``smollm2:pool=mean``). embedlab
encodes the same batch with ``smollm2:pool=mean`` from an empty token-state cache, so its time includes
tokenising, writing the token states and pooling; the dequantised model folder is shared, and both models
are loaded and warmed up before anything is timed.

On a shared machine the load changes faster than a whole pass over the texts takes, so the two code paths
are interleaved batch by batch: each batch is encoded by both, one right after the other, the order
alternating from batch to batch, and the ratio plain time / embedlab time of each batch is one paired
sample. The median of the paired ratios is the figure (target ≥ 0.95×); the ratio of the summed times and
the quartiles of the paired ratios are printed beside it.

``--dtype bf16`` (or fp16, int8) runs both paths on the model loaded in that compute (the GGUF's converted
folder read straight into bf16, no second conversion) and adds an fp32 embedlab pass over the same batches,
interleaved, for the ratio bf16/fp32 and the cosine of the two; the peak resident memory of the process is
printed (run one compute per process to read it), and, while the model loads, the peaks of its anonymous and
file-backed parts.

    python benchmarks/bench_llm.py [--sentences 512] [--repeats 1] [--batch-size 32] [--threads 1] [--dtype fp32]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from _common import sts_test_sentences

import embedlab
from embedlab.models.loading import load_model
from embedlab.models.precision import COMPUTES
from embedlab.runtime.settings import cache_root, configure


def plain_mean(model, tokenizer, batch: list[str]) -> np.ndarray:
    """The user's loop body: one padded batch, one forward pass, masked mean of the last hidden layer."""
    with torch.inference_mode():
        inputs = tokenizer(batch, padding=True, return_tensors="pt")
        hidden = model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return ((hidden * mask).sum(1) / mask.sum(1)).float().numpy()


def fresh_cache(machine_models) -> str:
    """An empty cache (no token states) that shares the machine's dequantised model folders."""
    folder = tempfile.mkdtemp(prefix="embedlab-bench-llm-")
    os.symlink(machine_models, os.path.join(folder, "models"))
    configure(cache_root=folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=1, help="passes over the sentences, each from an empty cache")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads, the same for both code paths")
    parser.add_argument("--dtype", choices=COMPUTES, default="fp32", help="compute of the model for both code paths")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    sentences = list(dict.fromkeys(sts_test_sentences()))[: args.sentences]  # distinct: every batch is new to the cache
    batches = [sentences[start : start + args.batch_size] for start in range(0, len(sentences), args.batch_size)]
    machine_models = cache_root() / "models"
    with MemorySampler() as load_memory:
        loaded = load_model("smollm2", compute=args.dtype)  # converts the GGUF once into the machine's cache
    model, tokenizer = loaded.model, loaded.tokenizer
    print(f"peak RSS after loading smollm2 in {args.dtype}: {peak_rss_gb():.2f} GB; while loading, peak anonymous "
          f"{load_memory.peak['RssAnon']:.3f} GB and peak file-backed {load_memory.peak['RssFile']:.3f} GB "
          f"(before: {load_memory.before['RssAnon']:.3f} / {load_memory.before['RssFile']:.3f} GB)", flush=True)
    spec = "smollm2:pool=mean" + {"fp32": "", "int8": ",quantize=int8"}.get(args.dtype, f",dtype={args.dtype}")
    plain_mean(model, tokenizer, sentences[:8])  # warm-up of both paths, outside the timed region
    embedlab.load(spec).encode(sentences[-8:], batch_size=args.batch_size)

    ratios, plain_total, ours_total, difference = [], 0.0, 0.0, 0.0
    started = open("/proc/loadavg").read().split()[:3]
    for repeat in range(args.repeats):
        folder = fresh_cache(machine_models)
        method = embedlab.load(spec)
        method.encode(["warm-up outside the timed region"], batch_size=args.batch_size)  # the model held by the method
        for number, batch in enumerate(batches):
            timings = {}
            for side in (("plain", "ours") if (repeat + number) % 2 == 0 else ("ours", "plain")):
                start = time.perf_counter()
                if side == "plain":
                    reference = plain_mean(model, tokenizer, batch)
                else:
                    ours = method.encode(batch, batch_size=args.batch_size)
                timings[side] = time.perf_counter() - start
            ratios.append(timings["plain"] / timings["ours"])
            plain_total += timings["plain"]
            ours_total += timings["ours"]
            difference = max(difference, float(np.abs(ours - reference).max()))
        shutil.rmtree(folder, ignore_errors=True)
    ended = open("/proc/loadavg").read().split()[:3]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(f"smollm2, {len(sentences)} distinct STS-B test sentences, batch size {args.batch_size}, "
          f"{len(batches)} batches x {args.repeats} repeats = {len(ratios)} paired batches, torch threads {torch.get_num_threads()}")
    print(f"load average at start {' '.join(started)}, at end {' '.join(ended)}")
    print(f"summed time: plain transformers {plain_total:.2f} s, embedlab (empty cache) {ours_total:.2f} s, "
          f"ratio {plain_total / ours_total:.3f}x")
    print(f"paired ratios plain/embedlab: median {statistics.median(ratios):.3f}x "
          f"(quartiles {quartiles[0]:.3f}, {quartiles[2]:.3f}; min {min(ratios):.3f}, max {max(ratios):.3f}) (target >= 0.95)")
    print(f"max abs difference of the vectors: {difference:.2e}")
    print(f"peak RSS of the process ({args.dtype}): {peak_rss_gb():.2f} GB")
    if args.dtype != "fp32":
        compare_with_fp32(spec, batches, args.batch_size, machine_models)


class MemorySampler:
    """Peak anonymous and file-backed resident memory (``/proc/self/status``) while the block runs, sampled
    every 2 ms: a model read through memory maps shows its file's pages as file-backed (clean, dropped by the
    kernel under pressure), its cast or dequantised copies as anonymous memory (which must fit)."""

    def __enter__(self) -> "MemorySampler":
        self.before = resident()
        self.peak = dict(self.before)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            for key, value in resident().items():
                self.peak[key] = max(self.peak[key], value)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for key, value in resident().items():
            self.peak[key] = max(self.peak[key], value)


def resident() -> dict[str, float]:
    """RssAnon and RssFile of this process, in GB."""
    values = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                values[key] = int(value.split()[0]) / 1e6  # kB
    return values


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux reports kilobytes


def compare_with_fp32(spec: str, batches: list[list[str]], batch_size: int, machine_models) -> None:
    """embedlab in ``spec``'s compute and in fp32 over the same batches, interleaved: time ratio and cosines."""
    folder = fresh_cache(machine_models)
    methods = {"lower": embedlab.load(spec), "fp32": embedlab.load("smollm2:pool=mean")}
    for method in methods.values():
        method.encode(["warm-up outside the timed region"], batch_size=batch_size)
    totals, cosines = {"lower": 0.0, "fp32": 0.0}, []
    for number, batch in enumerate(batches):
        vectors = {}
        for side in (("lower", "fp32") if number % 2 == 0 else ("fp32", "lower")):
            start = time.perf_counter()
            vectors[side] = methods[side].encode(batch, batch_size=batch_size, normalize_embeddings=True)
            totals[side] += time.perf_counter() - start
        cosines.extend(np.einsum("ij,ij->i", vectors["lower"], vectors["fp32"]).tolist())
    shutil.rmtree(folder, ignore_errors=True)
    print(f"{spec} vs fp32, interleaved batch by batch: {totals['lower']:.2f} s vs {totals['fp32']:.2f} s, "
          f"ratio {totals['fp32'] / totals['lower']:.3f}x; min cosine to fp32 {min(cosines):.6f}")


if __name__ == "__main__":
    main()
