"""``bench_neural.py --compare speed``: every neural path end to end from an empty cache, interleaved with exact fp32.

Each spec's ``encode`` over one block of texts is timed in a cache folder of its own, created empty just
before (so no spec borrows another's frozen features or vectors); the model is loaded before the clock
starts, and every spec has encoded one other sentence once, untimed (:data:`WARM_UP_TEXT`), so that the
process's first-call costs fall on none of them. Blocks interleave the specs (exact fp32 first in each), so a
shared machine's load falls on all.
Reports texts/s, the ratio to exact fp32, the CPU seconds per text and their ratio (the steadier figure
on a shared machine), cosine min/mean to exact fp32 and the STS-B Spearman of the
pairs whose two sentences are among the texts (with a bootstrap 95 % interval), and what ``dtype=auto``
measured on this machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np
import torch
from scipy.stats import spearmanr

import embedlab
from embedlab.data.sts import stsb
from embedlab.evaluation.scoring import cosines
from embedlab.models.compute_choice import measured_compute
from embedlab.runtime.settings import configure

SPEED_SPECS = (
    ("exact fp32", "neural:minilm"),
    ("exact bf16", "neural:minilm,dtype=bf16"),
    ("candidates fp32", "neural:minilm,softmax=candidates"),
    ("candidates bf16", "neural:minilm,softmax=candidates,dtype=bf16"),
    ("cand. bf16 K=128", "neural:minilm,softmax=candidates,candidates=128,dtype=bf16"),
)
# Encoded once per spec, untimed, before the first block: a process's first call of a path pays one-time costs
# (oneDNN building its bf16 kernels for new shapes, the bf16 model copy) that would otherwise fall on
# whichever spec of the first block meets them first. Not one of the timed texts, and in its own cache folder.
WARM_UP_TEXT = "A sentence encoded once before the clock, so that no spec pays the process's first-call costs."


def _warm_up(spec: str) -> None:
    """``spec`` run once on :data:`WARM_UP_TEXT` in a cache folder of its own, thrown away."""
    _timed_encode(spec, [WARM_UP_TEXT])


def _timed_encode(spec: str, texts: list[str]) -> tuple[np.ndarray, float, float]:
    """``spec``'s vectors of ``texts``, the wall-clock seconds ``encode`` took and the CPU seconds this process
    spent in it (every thread), from a new empty cache folder. On a shared machine the CPU seconds are the
    steadier measure of the work: wall-clock time then mostly measures the other jobs."""
    folder = tempfile.mkdtemp(prefix="embedlab-bench-neural-")
    try:
        configure(cache_root=folder)
        method = embedlab.load(spec)
        method.embedder.load()  # loaded (the dtype resolved, a lower one's model copy made) before the clock starts
        started, cpu_started = time.perf_counter(), time.process_time()
        vectors = method.encode(texts)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        configure()
    return vectors, seconds, cpu_seconds


def stsb_spearman(texts: list[str], vectors: np.ndarray, resamples: int = 1000, seed: int = 0) -> dict[str, float]:
    """Spearman ρ of cosine against the gold score over the STS-B test pairs both of whose sentences are in
    ``texts``, with a percentile bootstrap 95 % interval over those pairs (``resamples``, one seed)."""
    test = stsb("test")
    row = {text: index for index, text in enumerate(texts)}
    pairs = [(row[first], row[second], score) for first, second, score in zip(test.first, test.second, test.scores) if first in row and second in row]
    left, right, gold = (np.array(column) for column in zip(*pairs))
    predicted = cosines(vectors[left], vectors[right])
    rho = float(spearmanr(predicted, gold).statistic)
    generator = np.random.default_rng(seed)
    draws = [spearmanr(predicted[sample], gold[sample]).statistic for sample in (generator.integers(0, len(gold), len(gold)) for _ in range(resamples))]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return {"pairs": len(gold), "spearman": rho, "low": float(low), "high": float(high)}


def compare_speed(texts: list[str], block: int, device: str | None = None, specs: tuple[tuple[str, str], ...] = SPEED_SPECS) -> dict:
    """Every spec of ``specs`` over ``texts`` from an empty cache, interleaved block by block; figures as a dict."""
    where = f",device={device}" if device else ""
    specs = tuple((name, spec + where) for name, spec in specs)
    parts: dict[str, list[np.ndarray]] = {name: [] for name, _ in specs}
    seconds, cpu_seconds = dict.fromkeys(parts, 0.0), dict.fromkeys(parts, 0.0)
    for _, spec in specs:
        _warm_up(spec)
    for start in range(0, len(texts), block):
        piece = texts[start : start + block]
        for name, spec in specs:
            vectors, spent, cpu_spent = _timed_encode(spec, piece)
            parts[name].append(vectors)
            seconds[name] += spent
            cpu_seconds[name] += cpu_spent
        print(f"  texts {start}..{start + len(piece) - 1}: " + ", ".join(f"{name} {seconds[name]:.1f} s ({cpu_seconds[name]:.1f} CPU s)" for name in seconds)
              + f" so far, load average {os.getloadavg()[0]:.1f}", flush=True)
    exact_name = specs[0][0]
    exact = np.concatenate(parts[exact_name])
    rows = {}
    for name, spec in specs:
        vectors = np.concatenate(parts[name])
        agreement = cosines(exact, vectors)
        rows[name] = {"spec": spec, "s": seconds[name], "texts_per_s": len(texts) / seconds[name], "s_per_text": seconds[name] / len(texts),
                      "ratio_to_exact_fp32": seconds[exact_name] / seconds[name], "cpu_s": cpu_seconds[name],
                      "cpu_s_per_text": cpu_seconds[name] / len(texts), "cpu_ratio_to_exact_fp32": cpu_seconds[exact_name] / cpu_seconds[name],
                      "cosine_min": float(agreement.min()),
                      "cosine_mean": float(agreement.mean()), "stsb": stsb_spearman(texts, vectors)}
    return {"texts": len(texts), "block": block, "rows": rows, "auto": _auto_choice(device)}


def _auto_choice(device: str | None) -> dict:
    """What ``dtype=auto`` measured on this machine for MiniLM's width (the decision and its speed ratios)."""
    choice = measured_compute(torch.device("cuda" if device and device.startswith("cuda") else "cpu"), 384)
    return {"compute": choice.compute, "reason": choice.reason, "seconds": choice.seconds, "machine": choice.machine}


def print_speed(figures: dict) -> None:
    print(f"\n{'path':18s} {'texts/s':>8s} {'s/text':>8s} {'x exact fp32':>12s} {'CPU s/text':>10s} {'x by CPU s':>10s} {'cos min':>9s} {'cos mean':>9s}  "
          "STS-B rho [95 % CI] (pairs)")
    for name, row in figures["rows"].items():
        stsb_row = row["stsb"]
        print(f"{name:18s} {row['texts_per_s']:8.2f} {row['s_per_text']:8.4f} {row['ratio_to_exact_fp32']:11.2f}x {row['cpu_s_per_text']:10.4f} "
              f"{row['cpu_ratio_to_exact_fp32']:9.2f}x {row['cosine_min']:9.6f} "
              f"{row['cosine_mean']:9.6f}  {stsb_row['spearman']:.4f} [{stsb_row['low']:.4f}, {stsb_row['high']:.4f}] ({stsb_row['pairs']})")
    auto = figures["auto"]
    print(f"dtype=auto on {auto['machine']}: {auto['compute']} ({auto['reason']})")
