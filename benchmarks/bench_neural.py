"""Benchmark: per-text reference micro-tuning vs the batched path (neural-embeddings paper, Appendix B).

Same texts (the first STS-B test pairs' sentences, 200 by default), same head, same options. Prints
seconds per text, the speed-up, the cosine between the two paths' embeddings, the achieved GFLOP/s of
each path (analytic count of the work it does), and a plain matrix-multiply GFLOP/s on this machine.

    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/bench_neural.py [--texts 200] [--threads 2]

Timings on a shared machine are contended: the load average is printed next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
from _common import sts_test_pairs

from embedlab.neural.family import embed_texts
from embedlab.neural.head import load_masked_lm
from embedlab.neural.inputs import text_inputs
from embedlab.neural.options import NeuralOptions, resolve_parameter_names


def sts_test_sentences(count: int) -> list[str]:
    """The first ``count`` distinct sentences of the STS-B test pairs, in file order (s1, s2, s1, s2, …)."""
    unique = dict.fromkeys(sentence for pair in sts_test_pairs() for sentence in pair)
    return list(unique)[:count]


def encoder_flops(masked_lm, tokens: int, length: int) -> float:
    """Forward FLOPs of the frozen encoder over ``tokens`` tokens in inputs of ``length`` (matmuls only)."""
    hidden = masked_lm.hidden_size
    intermediate = int(masked_lm.model.config.intermediate_size)
    per_token_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * length * hidden
    return float(tokens * per_token_layer * masked_lm.num_layers)


def work(masked_lm, texts: list[str], options: NeuralOptions) -> tuple[float, float]:
    """Analytic FLOPs of (reference, batched) for the head preset: encoder once + epochs x head work."""
    hidden = masked_lm.hidden_size
    vocab = int(masked_lm.model.config.vocab_size)
    reference = batched = 0.0
    for text in texts:
        inputs = text_inputs(text, masked_lm.tokenizer, masked_lm.max_length, options.blueprints, "bench")
        rows, length = inputs.input_ids.shape
        masked = inputs.masked_positions
        frozen = encoder_flops(masked_lm, rows * length, length)
        # reference: transform + decoder at every position, forward and backward to the transform's output
        reference += frozen + options.epochs * rows * length * (2 * hidden * hidden + 4 * hidden * vocab)
        # batched: dense matmul once, decoder only at masked positions, forward and backward
        batched += frozen + masked * 2 * hidden * hidden + options.epochs * masked * 4 * hidden * vocab
    return reference, batched


def matmul_gflops(repeats: int = 5) -> float:
    """Plain float32 matmul speed at the decoder's shape: (2048 x 384) @ (384 x 30522)."""
    left = torch.randn(2048, 384)
    right = torch.randn(384, 30522)
    torch.mm(left, right)
    started = time.perf_counter()
    for _ in range(repeats):
        torch.mm(left, right)
    seconds = (time.perf_counter() - started) / repeats
    return 2 * 2048 * 384 * 30522 / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--block", type=int, default=50, help="texts per interleaved block (batched then reference); 0: one block")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--params", default="head")
    parser.add_argument("--head", default="auto", help="auto (the shipped/own head), untrained, or a head file")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    masked_lm = load_masked_lm(args.model, head=args.head)
    texts = sts_test_sentences(args.texts)
    options = NeuralOptions(tuple(resolve_parameter_names(args.params, masked_lm.num_layers)), epochs=args.epochs)
    print(f"model {args.model} (head: {masked_lm.head_origin}), {len(texts)} STS-B test sentences, params={args.params}, "
          f"epochs={args.epochs}, torch threads {torch.get_num_threads()}, load average before: {os.getloadavg()}")
    matmul_before = matmul_gflops()

    # Interleave the two paths block by block so both see the same contention on a shared machine.
    block = args.block or len(texts)
    batched_parts, reference_parts = [], []
    batched_seconds = reference_seconds = 0.0
    for start in range(0, len(texts), block):
        piece = texts[start : start + block]
        started = time.perf_counter()
        batched_parts.append(embed_texts(masked_lm, piece, options, path="batched"))
        batched_seconds += time.perf_counter() - started
        started = time.perf_counter()
        reference_parts.append(embed_texts(masked_lm, piece, options, path="reference"))
        reference_seconds += time.perf_counter() - started
        print(f"  texts {start}..{start + len(piece) - 1}: batched {batched_seconds:.0f} s, reference {reference_seconds:.0f} s so far, "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
    batched = np.concatenate(batched_parts)
    reference = np.concatenate(reference_parts)
    matmul_after = matmul_gflops()

    cosines = (reference * batched).sum(axis=1) / np.linalg.norm(reference, axis=1) / np.linalg.norm(batched, axis=1)
    reference_flops, batched_flops = work(masked_lm, texts, options)
    figures = {
        "texts": len(texts),
        "reference_s_per_text": reference_seconds / len(texts),
        "batched_s_per_text": batched_seconds / len(texts),
        "speedup": reference_seconds / batched_seconds,
        "cosine_min": float(cosines.min()),
        "cosine_mean": float(cosines.mean()),
        "reference_gflop": reference_flops / 1e9,
        "batched_gflop": batched_flops / 1e9,
        "reference_gflops_per_s": reference_flops / reference_seconds / 1e9,
        "batched_gflops_per_s": batched_flops / batched_seconds / 1e9,
        "matmul_gflops_per_s_before": matmul_before,
        "matmul_gflops_per_s_after": matmul_after,
        "load_average_after": os.getloadavg(),
        "threads": torch.get_num_threads(),
        "block": block,
    }
    print(f"reference (one text at a time): {figures['reference_s_per_text']:.3f} s/text, "
          f"{figures['reference_gflop']:.0f} GFLOP, {figures['reference_gflops_per_s']:.1f} GFLOP/s")
    print(f"batched (all texts together):   {figures['batched_s_per_text']:.3f} s/text, "
          f"{figures['batched_gflop']:.0f} GFLOP, {figures['batched_gflops_per_s']:.1f} GFLOP/s")
    print(f"speed-up batched vs reference: {figures['speedup']:.2f}x; cosine(reference, batched) min {figures['cosine_min']:.6f}, mean {figures['cosine_mean']:.6f}")
    print(f"plain matmul (2048x384 @ 384x30522): {matmul_before:.1f} GFLOP/s before, {matmul_after:.1f} GFLOP/s after; load average after {figures['load_average_after']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump(figures, stream, indent=2)


if __name__ == "__main__":
    main()
