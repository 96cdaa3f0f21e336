"""Benchmark: per-text reference micro-tuning vs the batched path (neural-embeddings paper, Appendix B),
or (``--compare candidates``) the batched path's candidate-set softmax vs its exact softmax.

Same texts (the first STS-B test pairs' sentences, 200 by default), same head, same options. Prints
seconds per text, the speed-up, the cosine between the two paths' embeddings, the achieved GFLOP/s of
each path (analytic count of the work it does), and a plain matrix-multiply GFLOP/s on this machine.

    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/bench_neural.py [--texts 200] [--threads 2]
    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/bench_neural.py --compare candidates --candidates 64,256,1024
    HF_HUB_OFFLINE=1 python benchmarks/bench_neural.py --device cuda --texts 2000 --threads 2
    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/bench_neural.py --compare speed --texts 200 --block 50 [--device cuda]

``--compare speed`` (:mod:`neural_speed`): exact fp32, exact bf16, candidates fp32, candidates bf16 and candidates bf16 with K = 128 end to end
(``embedlab.load(spec).encode``), each from an empty cache folder, interleaved block by block with exact fp32:
texts/s, ratio to exact fp32, cosine min/mean to it, STS-B Spearman with a bootstrap interval, and what
``dtype=auto`` measured here; with ``--device cuda`` the specs run there (CUDA autocast for bf16).

``--device cuda|cpu`` (``--compare device``): the batched exact and candidate-set paths on that device
beside the CPU batched path on the same texts (texts/s, speed-up, cosine device vs CPU), and the
GFLOP/s they reach against a plain float32 matmul on that device (TF32 off, as micro-tuning runs).

Timings on a shared machine are contended: the load average is printed next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from dataclasses import replace

import numpy as np
import torch
from _common import cpu_description, sts_test_pairs
from neural_speed import compare_speed, print_speed

from embedlab.evaluation.scoring import cosines
from embedlab.neural.frozen import frozen_features
from embedlab.neural.top import BatchedTop
from embedlab.neural.candidates import candidate_sets, top_ids
from embedlab.neural.device import full_float32, resolve_device
from embedlab.neural.tuning import embed_texts, masked_lm_on
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


def candidate_work(masked_lm, texts: list[str], options: NeuralOptions, counts: list[int]) -> tuple[float, dict[int, float], dict[int, float]]:
    """Analytic FLOPs of the batched exact path and, per K, of the batched candidates path; mean set sizes.

    Candidates: encoder once, epoch 1 exact, then per masked position 2 x H x |C| for the epoch-1 logits at
    the candidates and their softmax mean, and 4 x H x |C| per further epoch (forward and backward), with
    |C| the text's own candidate set (from the untuned head's logits, i.e. epoch 1's). Padding to a
    chunk's largest set is not counted (texts are sorted by set size, so it is small).
    """
    hidden = masked_lm.hidden_size
    vocab = int(masked_lm.model.config.vocab_size)
    _, exact = work(masked_lm, texts, options)
    candidates = {count: 0.0 for count in counts}
    sizes = {count: 0.0 for count in counts}
    top = BatchedTop(masked_lm, options.params, 1)
    for text in texts:
        inputs = text_inputs(text, masked_lm.tokenizer, masked_lm.max_length, options.blueprints, "bench")
        rows, length = inputs.input_ids.shape
        masked = inputs.masked_positions
        frozen = frozen_features(masked_lm, [inputs], top.block_mode, need_plain=False)
        with torch.no_grad():
            logits = top.logits(top.head_input(frozen.features, frozen.owner), frozen.owner)
        for count in counts:
            size = len(candidate_sets(top_ids(logits, count), frozen.labels, frozen.owner, 1)[0][0])
            sizes[count] += size / len(texts)
            candidates[count] += (encoder_flops(masked_lm, rows * length, length) + masked * 2 * hidden * hidden
                                  + masked * 4 * hidden * vocab + masked * 4 * hidden * size * options.epochs)
    return exact, candidates, sizes


def compare_candidates(masked_lm, texts: list[str], options: NeuralOptions, counts: list[int], block: int) -> dict:
    """Batched exact vs batched candidates (each K), interleaved block by block; figures as a dict."""
    exact_parts: list[np.ndarray] = []
    candidate_parts: dict[int, list[np.ndarray]] = {count: [] for count in counts}
    exact_seconds = 0.0
    candidate_seconds = {count: 0.0 for count in counts}
    for start in range(0, len(texts), block):
        piece = texts[start : start + block]
        started = time.perf_counter()
        exact_parts.append(embed_texts(masked_lm, piece, options, path="batched"))
        exact_seconds += time.perf_counter() - started
        for count in counts:
            started = time.perf_counter()
            candidate_parts[count].append(embed_texts(masked_lm, piece, replace(options, softmax="candidates", candidates=count), path="batched"))
            candidate_seconds[count] += time.perf_counter() - started
        print(f"  texts {start}..{start + len(piece) - 1}: exact {exact_seconds:.0f} s, "
              + ", ".join(f"K={count} {candidate_seconds[count]:.0f} s" for count in counts)
              + f" so far, load average {os.getloadavg()[0]:.1f}", flush=True)
    exact = np.concatenate(exact_parts)
    exact_flops, candidate_flops, sizes = candidate_work(masked_lm, texts, options, counts)
    figures: dict = {
        "texts": len(texts),
        "exact_s_per_text": exact_seconds / len(texts),
        "exact_gflop": exact_flops / 1e9,
        "exact_gflops_per_s": exact_flops / exact_seconds / 1e9,
        "candidates": {},
    }
    print(f"batched exact: {figures['exact_s_per_text']:.4f} s/text, {figures['exact_gflop']:.0f} GFLOP, {figures['exact_gflops_per_s']:.1f} GFLOP/s")
    for count in counts:
        vectors = np.concatenate(candidate_parts[count])
        agreement = cosines(exact, vectors)
        row = {
            "s_per_text": candidate_seconds[count] / len(texts),
            "speedup": exact_seconds / candidate_seconds[count],
            "gflop": candidate_flops[count] / 1e9,
            "gflop_ratio": exact_flops / candidate_flops[count],
            "gflops_per_s": candidate_flops[count] / candidate_seconds[count] / 1e9,
            "mean_candidates": sizes[count],
            "cosine_min": float(agreement.min()),
            "cosine_mean": float(agreement.mean()),
        }
        figures["candidates"][count] = row
        print(f"batched candidates K={count}: {row['s_per_text']:.4f} s/text, speed-up {row['speedup']:.2f}x; "
              f"{row['gflop']:.0f} GFLOP (ratio {row['gflop_ratio']:.2f}x), {row['gflops_per_s']:.1f} GFLOP/s; "
              f"mean |C| {row['mean_candidates']:.0f}; cosine to exact min {row['cosine_min']:.6f}, mean {row['cosine_mean']:.6f}")
    return figures


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(repeats: int = 5, device: torch.device | str = "cpu") -> float:
    """Plain float32 matmul speed at the decoder's shape: (2048 x 384) @ (384 x 30522), TF32 off (on a GPU
    ten times the repeats, as one product there takes about a millisecond)."""
    device = torch.device(device)
    repeats *= 10 if device.type == "cuda" else 1
    left = torch.randn(2048, 384, device=device)
    right = torch.randn(384, 30522, device=device)
    with full_float32():
        torch.mm(left, right)
        _synchronize(device)
        started = time.perf_counter()
        for _ in range(repeats):
            torch.mm(left, right)
        _synchronize(device)
    seconds = (time.perf_counter() - started) / repeats
    return 2 * 2048 * 384 * 30522 / seconds / 1e9


def analytic_work(masked_lm, texts: list[str], options: NeuralOptions, count: int) -> tuple[float, float, float]:
    """``candidate_work`` for one K, counted with every CPU thread (it runs the untuned head over every text)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or threads)
    try:
        exact, candidates, sizes = candidate_work(masked_lm, texts, options, [count])
    finally:
        torch.set_num_threads(threads)
    return exact, candidates[count], sizes[count]


def batch_independence(on_device, texts: list[str], options: NeuralOptions, in_batch: np.ndarray) -> float:
    """Least cosine between each text's vector embedded alone on the device and in the whole batch."""
    alone = np.concatenate([embed_texts(on_device, [text], options, path="batched") for text in texts])
    return float(cosines(alone, in_batch).min())


def compare_device(masked_lm, texts: list[str], options: NeuralOptions, device: torch.device, count: int,
                   cpu_texts: int | None = None, alone: int = 8) -> dict:
    """Batched exact and candidate-set (K = ``count``) paths on ``device`` over ``texts`` beside the CPU batched
    path on the first ``cpu_texts`` of them (all by default: on a fast device the CPU is what takes the time),
    texts per second each; cosines device vs CPU on the shared texts; and the first ``alone`` texts embedded
    one at a time on the device against their vectors from the whole batch (batch independence)."""
    on_device = masked_lm_on(masked_lm, device)
    alone = min(alone, len(texts))
    candidates = replace(options, softmax="candidates", candidates=count)
    embed_texts(on_device, texts[:2], replace(options, epochs=1))  # warm-up: kernels, allocator, memory budget query
    cpu_count = len(texts) if cpu_texts is None else min(cpu_texts, len(texts))
    # counted once per text: the CPU path's texts, then the rest, which only the device embeds
    cpu_flops = analytic_work(masked_lm, texts[:cpu_count], options, count)
    rest = analytic_work(masked_lm, texts[cpu_count:], options, count) if cpu_count < len(texts) else (0.0, 0.0, 0.0)
    exact_flops, candidate_flops = cpu_flops[0] + rest[0], cpu_flops[1] + rest[1]
    mean_candidates = (cpu_flops[2] * cpu_count + rest[2] * (len(texts) - cpu_count)) / len(texts)
    figures: dict = {"texts": len(texts), "cpu_texts": cpu_count, "device": str(device), "candidates": count,
                     "mean_candidates": mean_candidates, "torch": torch.__version__}
    matmul = matmul_gflops(device=device)
    figures["matmul_gflops_per_s"] = matmul
    runs = {}
    for name, run_options, flops, flops_cpu in (("exact", options, exact_flops, cpu_flops[0]),
                                               ("candidates", candidates, candidate_flops, cpu_flops[1])):
        for where, lm, label, piece, work_done in (("device", on_device, str(device), texts, flops),
                                                   ("cpu", masked_lm, "CPU path", texts[:cpu_count], flops_cpu)):
            started = time.perf_counter()
            vectors = embed_texts(lm, piece, run_options, path="batched")
            seconds = time.perf_counter() - started
            runs[name, where] = vectors
            row = {"texts": len(piece), "s": seconds, "texts_per_s": len(piece) / seconds, "gflops_per_s": work_done / seconds / 1e9}
            figures[f"{name}_{where}"] = row
            print(f"  {name:10s} on {label:8s}: {row['texts_per_s']:8.2f} texts/s ({len(piece)} texts, {seconds:.1f} s), "
                  f"{row['gflops_per_s']:.1f} GFLOP/s, load average {os.getloadavg()[0]:.1f}", flush=True)
        device_vectors, cpu_vectors = runs[name, "device"], runs[name, "cpu"]
        agreement = cosines(device_vectors[:cpu_count], cpu_vectors)
        device_row, cpu_row = figures[f"{name}_device"], figures[f"{name}_cpu"]
        figures[name] = {"speedup_vs_cpu": device_row["texts_per_s"] / cpu_row["texts_per_s"], "fraction_of_matmul": device_row["gflops_per_s"] / matmul,
                         "cosine_device_cpu_min": float(agreement.min()), "cosine_device_cpu_mean": float(agreement.mean()),
                         "cosine_alone_vs_batch_min": batch_independence(on_device, texts[:alone], run_options, device_vectors[:alone])}
        print(f"{name}: {device_row['texts_per_s']:.2f} texts/s on {device} vs {cpu_row['texts_per_s']:.2f} on the CPU "
              f"({figures[name]['speedup_vs_cpu']:.2f}x); {device_row['gflops_per_s']:.1f} GFLOP/s = {100 * figures[name]['fraction_of_matmul']:.1f} % "
              f"of the plain matmul's {matmul:.1f} on {device}; cosine {device} vs CPU min {figures[name]['cosine_device_cpu_min']:.7f} "
              f"({cpu_count} texts); alone vs in the batch on {device} min {figures[name]['cosine_alone_vs_batch_min']:.7f} ({alone} texts)", flush=True)
    figures["cosine_candidates_exact_cpu_min"] = float(cosines(runs["exact", "cpu"], runs["candidates", "cpu"]).min())
    figures["cosine_candidates_exact_device_min"] = float(cosines(runs["exact", "device"], runs["candidates", "device"]).min())
    figures["cpu_matmul_gflops_per_s"] = matmul_gflops()
    return figures


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
    parser.add_argument("--compare", choices=("reference", "candidates", "device", "speed"), default=None,
                        help="reference: per-text reference vs batched; candidates: batched candidates vs batched exact; "
                             "device: batched paths on --device vs on the CPU (the default when --device is given, else reference); "
                             "speed: exact/candidates x fp32/bf16 specs end to end from an empty cache, interleaved (on --device if given)")
    parser.add_argument("--device", default=None, help="--compare device: cuda, cuda:N or cpu (auto: CUDA where present)")
    parser.add_argument("--candidates", default="256", help="--compare candidates: comma-separated K values")
    parser.add_argument("--cpu-texts", type=int, default=None, help="--compare device: time the CPU path on the first N texts only")
    args = parser.parse_args()
    args.compare = args.compare or ("device" if args.device else "reference")
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_description()}; torch {torch.__version__}")
    if args.compare == "speed":
        texts = sts_test_sentences(args.texts)
        print(f"{len(texts)} STS-B test sentences, blocks of {args.block or len(texts)}, torch threads {torch.get_num_threads()}, "
              f"load average before: {os.getloadavg()}")
        figures = compare_speed(texts, args.block or len(texts), args.device)
        figures.update(load_average_after=os.getloadavg(), threads=torch.get_num_threads(), cpu=cpu_description(), torch=torch.__version__)
        print_speed(figures)
        print(f"load average after {figures['load_average_after']}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as stream:
                json.dump(figures, stream, indent=2)
        return
    masked_lm = load_masked_lm(args.model, head=args.head)
    texts = sts_test_sentences(args.texts)
    options = NeuralOptions(tuple(resolve_parameter_names(args.params, masked_lm.num_layers, masked_lm.layout)), epochs=args.epochs)
    print(f"model {args.model} (head: {masked_lm.head_origin}), {len(texts)} STS-B test sentences, params={args.params}, "
          f"epochs={args.epochs}, torch threads {torch.get_num_threads()}, load average before: {os.getloadavg()}")
    if masked_lm.layout is not None and masked_lm.layout.family != "BERT":
        print(f"note: the GFLOP counts assume BERT's block and head shapes; for {masked_lm.layout.family} compare the seconds only")
    if args.compare == "device":
        device = resolve_device(args.device or "auto")
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print(f"device {device} ({name}); CPU path on {torch.get_num_threads()} threads; candidate-set K={args.candidates}")
        figures = compare_device(masked_lm, texts, options, device, int(args.candidates), args.cpu_texts)
        figures.update(load_average_after=os.getloadavg(), threads=torch.get_num_threads(), params=args.params, device_name=name)
        print(f"plain matmul on the CPU: {figures['cpu_matmul_gflops_per_s']:.1f} GFLOP/s; load average after {figures['load_average_after']}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as stream:
                json.dump(figures, stream, indent=2)
        return
    matmul_before = matmul_gflops()
    if args.compare == "candidates":
        counts = [int(count) for count in args.candidates.split(",")]
        figures = compare_candidates(masked_lm, texts, options, counts, args.block or len(texts))
        figures.update(matmul_gflops_per_s_before=matmul_before, matmul_gflops_per_s_after=matmul_gflops(),
                       load_average_after=os.getloadavg(), threads=torch.get_num_threads(), block=args.block, params=args.params)
        print(f"plain matmul: {matmul_before:.1f} GFLOP/s before, {figures['matmul_gflops_per_s_after']:.1f} after; load average after {figures['load_average_after']}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as stream:
                json.dump(figures, stream, indent=2)
        return

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

    agreement = cosines(reference, batched)
    bert_shaped = masked_lm.layout is None or masked_lm.layout.family == "BERT"  # the analytic count's shapes
    reference_flops, batched_flops = work(masked_lm, texts, options) if bert_shaped else (float("nan"), float("nan"))
    figures = {
        "texts": len(texts),
        "reference_s_per_text": reference_seconds / len(texts),
        "batched_s_per_text": batched_seconds / len(texts),
        "speedup": reference_seconds / batched_seconds,
        "cosine_min": float(agreement.min()),
        "cosine_mean": float(agreement.mean()),
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
