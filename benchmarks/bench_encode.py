"""embedlab `minilm` in fp32 / bf16 / int8 beside sentence-transformers in fp32 / bf16 (and its ONNX int8 where
optimum imports), on the 2,758 STS-B test sentences, side by side in one process, interleaved.

Every setting runs once per repeat, in an order that rotates each repeat, so machine noise (other jobs on
the same cores) falls on all of them alike. embedlab starts each run from an empty token-state cache (its
time includes computing and writing the token states). Printed per setting: the
median time, its ratio to sentence-transformers fp32, the minimum cosine to the same library's fp32
vectors, the STS-B test Spearman, and whether it is within the quality budget of issue 45 (bf16: min
cosine ≥ 0.999 and Spearman within 0.002; int8: Spearman within 0.005). Then embedlab's fastest setting
within budget over sentence-transformers' fastest within budget (target ≥ 1.2×), the CPU, and a profile
of one embedlab run (tokenising, the forward, token-state storing, pooling).

    python benchmarks/bench_encode.py [--repeats 3] [--batch-size 32] [--no-profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from unittest import mock

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from _common import fresh_cache, sts_test_sentences
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.data.sts import stsb
from embedlab.models.loading import resolve_model_path
from embedlab.models.precision import NATIVE_BF16_FLAGS, cpu_flags, native_bf16
from embedlab.tokens import forward

BUDGET = {"fp32": (1.0 - 1e-6, 0.0), "bf16": (0.999, 0.002), "int8": (-1.0, 0.005)}  # (min cosine, Spearman drop)


@dataclass
class Setting:
    name: str
    library: str  # "embedlab" or "sentence-transformers"
    compute: str  # fp32, bf16, int8: which budget applies
    run: Callable[[list[str], int], np.ndarray]
    times: list[float] = field(default_factory=list)
    vectors: np.ndarray | None = None


def embedlab_setting(spec: str, compute: str) -> Setting:
    return Setting(f"embedlab {spec}", "embedlab", compute,
                   lambda sentences, batch_size: embedlab.load(spec).encode(sentences, batch_size=batch_size, normalize_embeddings=True))


def one_stream_setting(spec: str, compute: str) -> Setting:
    """embedlab as before CPU streams: every batch in turn, each op on all torch threads (the comparison
    that shows what running one batch per core gains)."""
    def run(sentences: list[str], batch_size: int) -> np.ndarray:
        with mock.patch.object(forward, "stream_count", lambda device: 1):
            return embedlab.load(spec).encode(sentences, batch_size=batch_size, normalize_embeddings=True)

    return Setting(f"embedlab {spec} (one stream)", "embedlab", compute, run)


def st_setting(name: str, compute: str, model: SentenceTransformer) -> Setting:
    return Setting(name, "sentence-transformers", compute,
                   lambda sentences, batch_size: model.encode(sentences, batch_size=batch_size, normalize_embeddings=True))


def onnx_int8_setting(path: str) -> Setting | str:
    """sentence-transformers' ONNX backend, exported and quantised for avx512_vnni, or why it cannot run here."""
    try:
        from sentence_transformers import export_dynamic_quantized_onnx_model  # noqa: F401 - needs optimum
        import onnxruntime  # noqa: F401
        import optimum.onnxruntime  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any import failure is the reason it is missing
        return f"not run: optimum/onnxruntime do not import beside transformers {__import__('transformers').__version__} ({error})"
    import tempfile

    from sentence_transformers import export_dynamic_quantized_onnx_model

    folder = tempfile.mkdtemp(prefix="st-onnx-")
    shutil.copytree(path, folder, dirs_exist_ok=True)
    export_dynamic_quantized_onnx_model(SentenceTransformer(folder, backend="onnx"), "avx512_vnni", folder)
    model = SentenceTransformer(folder, backend="onnx", model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx"})
    return st_setting("sentence-transformers ONNX int8 (avx512_vnni)", "int8", model)


def quality(setting: Setting, reference: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    vectors = setting.vectors
    cosines = np.einsum("ij,ij->i", vectors, reference) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
    pairs = np.einsum("ij,ij->i", vectors[0::2], vectors[1::2])
    return float(cosines.min()), float(spearmanr(pairs, gold).statistic)


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    flags = sorted(flag for flag in cpu_flags() if flag.startswith(("avx", "amx", "fma")))
    return (f"CPU: {model}, {os.cpu_count()} cores, torch {torch.__version__} capability {torch.backends.cpu.get_cpu_capability()}, "
            f"native bf16: {native_bf16('cpu')} ({'/'.join(NATIVE_BF16_FLAGS)})\nflags: {' '.join(flags)}")


def profile(spec: str, sentences: list[str], batch_size: int) -> None:
    """Where one fresh-cache embedlab run spends its time, by the functions that do each job."""
    folder = fresh_cache()
    profiler = cProfile.Profile()
    # one stream: cProfile sees only the calling thread, and the streams run their forwards on their own
    with mock.patch.object(forward, "stream_count", lambda device: 1):
        profiler.enable()
        embedlab.load(spec).encode(sentences, batch_size=batch_size, normalize_embeddings=True)
        profiler.disable()
    shutil.rmtree(folder, ignore_errors=True)
    stats = pstats.Stats(profiler)
    # (file, function) of each job; nested calls of one function count once (the outermost, largest cumulative)
    jobs = {"tokenise (fast tokenizer)": ("tokenization_utils", "__call__"), "model forward": ("module.py", "_call_impl"),
            "forward + states to numpy": ("forward.py", "_batch_outputs"), "store token states (pack write)": ("packs.py", "write"),
            "pool (stages 2-4)": ("pipeline.py", "pool"), "encode total": ("base.py", "encode")}
    print(f"profile of one {spec} run (one stream) from an empty cache (cumulative seconds, cProfile overhead included):")
    for label, (file, function) in jobs.items():
        seconds = [value[3] for key, value in stats.stats.items() if key[2] == function and file in key[0]]
        print(f"  {label:34s} {max(seconds, default=0.0):7.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    print(machine())
    print(f"load average at the start: {' / '.join(f'{value:.2f}' for value in os.getloadavg())}")

    sentences, gold = sts_test_sentences(), stsb("test").scores
    path = str(resolve_model_path("minilm"))
    settings = [
        st_setting("sentence-transformers fp32", "fp32", SentenceTransformer(path)),
        st_setting("sentence-transformers bf16", "bf16", SentenceTransformer(path, model_kwargs={"dtype": torch.bfloat16})),
        embedlab_setting("minilm", "fp32"),
        embedlab_setting("minilm:dtype=bf16", "bf16"),
        one_stream_setting("minilm:dtype=bf16", "bf16"),
        embedlab_setting("minilm:quantize=int8", "int8"),
    ]
    onnx = onnx_int8_setting(path)
    if isinstance(onnx, Setting):
        settings.append(onnx)
    else:
        print(f"sentence-transformers ONNX int8: {onnx}")
    for setting in settings:  # load every model and warm every kernel before timing
        setting.run(sentences[:64], args.batch_size)
    for repeat in range(args.repeats):
        for setting in settings[repeat % len(settings):] + settings[:repeat % len(settings)]:
            folder = fresh_cache() if setting.library == "embedlab" else None
            start = time.perf_counter()
            setting.vectors = np.asarray(setting.run(sentences, args.batch_size), dtype=np.float32)
            setting.times.append(time.perf_counter() - start)
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
        print(f"repeat {repeat + 1}: " + ", ".join(f"{setting.name} {setting.times[-1]:.2f} s" for setting in settings), flush=True)
    report(settings, gold, args)
    print(f"load average at the end: {' / '.join(f'{value:.2f}' for value in os.getloadavg())}")
    if not args.no_profile:
        profile("minilm:dtype=bf16", sentences, args.batch_size)


def report(settings: list[Setting], gold: np.ndarray, args: argparse.Namespace) -> None:
    baseline = statistics.median(settings[0].times)
    references = {setting.library: setting.vectors for setting in settings if setting.compute == "fp32"}
    spearman_fp32 = {library: quality(next(s for s in settings if s.library == library and s.compute == "fp32"), vectors, gold)[1]
                     for library, vectors in references.items()}
    print(f"\nSTS-B test: {len(settings[0].vectors)} sentences, all-MiniLM-L6-v2, batch size {args.batch_size}, repeats {args.repeats}")
    print(f"{'setting':52s} {'median':>8s} {'ratio':>7s} {'min cos':>9s} {'Spearman':>9s}  budget")
    fastest: dict[str, tuple[float, str]] = {}
    for setting in settings:
        median = statistics.median(setting.times)
        min_cosine, spearman = quality(setting, references[setting.library], gold)
        floor, drop = BUDGET[setting.compute]
        within = min_cosine >= floor and spearman >= spearman_fp32[setting.library] - drop - 1e-12
        print(f"{setting.name:52s} {median:7.2f}s {baseline / median:6.2f}x {min_cosine:9.6f} {spearman:9.4f}  {'yes' if within else 'NO'}")
        if within and median < fastest.get(setting.library, (float("inf"), ""))[0]:
            fastest[setting.library] = (median, setting.name)
    ours, theirs = fastest["embedlab"], fastest["sentence-transformers"]
    print(f"fastest within budget: {ours[1]} {ours[0]:.2f} s vs {theirs[1]} {theirs[0]:.2f} s: "
          f"{theirs[0] / ours[0]:.2f}x (target >= 1.2)")


if __name__ == "__main__":
    main()
