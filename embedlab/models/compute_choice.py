"""``dtype=auto`` by measurement: the fastest compute of a model's shapes on this machine, within the quality budget.

CPU flags do not predict speed: on an Intel Xeon with AVX-512 BF16, bf16 encoding ran at 0.72× its fp32
(issue 59), on the AMD EPYC of the records at 1.5–1.8×. So on first use per machine (CPU model or GPU name,
torch version, torch thread count) and model width, ``auto`` times a short fixed workload of the model's
own shapes, one transformer block over :data:`WORKLOAD_TOKENS` tokens (attention projections, FFN, GELU,
two LayerNorms), in fp32 and in every lower compute the device runs natively (bf16: AVX-512 BF16/AMX or a
GPU that supports it; fp16: a GPU, or a CPU with AVX-512 FP16/AMX FP16), the computes interleaved so that
a shared machine's load falls on all alike. It picks the fastest of them whose quality loss is within the
documented budget (:data:`WITHIN_BUDGET`, docs/precision.md), and only when it takes at most
:data:`MARGIN` of fp32's time: within noise, fp32 stays (``auto`` is never slower than fp32).

The decision is kept as one small JSON file per machine and width in the cache folder
(``compute_choice``, cleared by ``embedlab cache clear``, listed by ``embedlab cache info``) and printed
once per process when it is first used. :func:`choose_compute` is the decision itself, a pure function
of the timings (tests inject them).
"""

from __future__ import annotations

import json
import statistics
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import torch

from embedlab.models.precision import NATIVE_BF16_FLAGS, TORCH_DTYPES, cpu_flags, native_bf16
from embedlab.runtime.cache.atomic import atomic_write_text
from embedlab.runtime.cache.budget import mark_recomputable
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.machine import cpu_model
from embedlab.runtime.memo import memo
from embedlab.runtime.progress import status
from embedlab.runtime.settings import cache_dir, cache_root

CHOICE_KIND = "compute_choice"
WORKLOAD_VERSION = 1  # part of the key: a changed workload measures again
WORKLOAD_TOKENS = 1024  # one CPU frozen forward's tokens (neural/device.py) and about one pooled batch's
REPEATS = 5
# A lower compute must take at most this fraction of fp32's time to be chosen: a 5 % edge is inside a
# shared machine's noise, and choosing it there could make auto slower than fp32.
MARGIN = 0.95
# Lower computes whose quality loss the records put within the budget (docs/precision.md: bf16 min cosine
# 0.99987 and STS-B Spearman within 0.002 of fp32 for pooled MiniLM; neural bf16 min cosine ≥ 0.99).
WITHIN_BUDGET = ("bf16", "fp16")
NATIVE_FP16_FLAGS = ("avx512_fp16", "amx_fp16")
_DECISIONS = memo("models.compute_choice")


@dataclass(frozen=True)
class ComputeChoice:
    """What ``auto`` resolved to on one machine for one width, and why."""

    compute: str
    reason: str
    seconds: dict[str, float] = field(default_factory=dict)  # the workload's median seconds, per compute timed
    machine: str = ""
    hidden: int = 0
    measured_at: str = ""


def machine_description(device: torch.device) -> str:
    """What a decision holds for: the CPU model (or GPU name), the torch version and the torch thread count."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}; torch {torch.__version__}"
    return f"{cpu_model()}; torch {torch.__version__}; {torch.get_num_threads()} threads"


def lower_computes(device: torch.device) -> dict[str, str | None]:
    """Each lower compute: None where ``device`` runs it natively, else why it is left out (it would be emulated)."""
    if device.type == "cuda":
        return {"bf16": None if native_bf16(device) else "this GPU does not support bf16", "fp16": None}
    flags = cpu_flags()
    capability = torch.backends.cpu.get_cpu_capability()
    return {
        "bf16": None if native_bf16(device) else f"no native bf16 ({' or '.join(NATIVE_BF16_FLAGS)} missing from the CPU flags, "
                                                  f"or torch's CPU capability {capability} is below AVX-512)",
        "fp16": None if capability.startswith("AVX512") and any(flag in flags for flag in NATIVE_FP16_FLAGS)
        else f"no native fp16 ({' or '.join(NATIVE_FP16_FLAGS)} missing from the CPU flags)",
    }


def choose_compute(seconds: Mapping[str, float], unavailable: Mapping[str, str | None]) -> tuple[str, str]:
    """(compute, reason) from the workload's ``seconds`` per compute (fp32 among them) and the lower computes
    left out with their reasons: the fastest within the budget that beats fp32 by :data:`MARGIN`, else fp32."""
    fp32 = seconds["fp32"]
    timed = {compute: value for compute, value in seconds.items() if compute in WITHIN_BUDGET}
    missing = "; ".join(f"{compute}: {why}" for compute, why in unavailable.items() if why)
    if not timed:
        return "fp32", f"no lower compute runs natively here ({missing})"
    fastest = min(timed, key=timed.__getitem__)
    ratios = ", ".join(f"{compute} {fp32 / value:.2f}x" for compute, value in timed.items())
    if timed[fastest] <= MARGIN * fp32:
        return fastest, f"{fastest} is the fastest within the quality budget (speed against fp32: {ratios})"
    return "fp32", f"no lower compute is at least {1 / MARGIN:.2f}x fp32 here (speed against fp32: {ratios})"


def _workload(device: torch.device, compute: str, hidden: int) -> Callable[[], None]:
    """One transformer block of width ``hidden`` (FFN 4 × hidden) over :data:`WORKLOAD_TOKENS` tokens in ``compute``."""
    generator = torch.Generator().manual_seed(0)
    dtype = TORCH_DTYPES[compute]

    def tensor(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * shape[-1] ** -0.5).to(device=device, dtype=dtype)

    x = tensor(WORKLOAD_TOKENS, hidden)
    attention, output, up, down = tensor(3 * hidden, hidden), tensor(hidden, hidden), tensor(4 * hidden, hidden), tensor(hidden, 4 * hidden)

    def run() -> None:
        with torch.inference_mode():
            mixed = torch.nn.functional.linear(torch.nn.functional.linear(x, attention)[:, :hidden], output)
            normed = torch.nn.functional.layer_norm(mixed + x, (hidden,))
            ffn = torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(normed, up)), down)
            torch.nn.functional.layer_norm(ffn + normed, (hidden,))
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return run


def time_workloads(device: torch.device, computes: tuple[str, ...], hidden: int, repeats: int = REPEATS) -> dict[str, float]:
    """Median seconds of the workload per compute, the computes interleaved repeat by repeat (one warm-up each)."""
    runs = {compute: _workload(device, compute, hidden) for compute in computes}
    samples: dict[str, list[float]] = {compute: [] for compute in computes}
    for run in runs.values():
        run()
    for _ in range(repeats):
        for compute, run in runs.items():
            started = time.perf_counter()
            run()
            samples[compute].append(time.perf_counter() - started)
    return {compute: statistics.median(values) for compute, values in samples.items()}


def _choice_path(device: torch.device, hidden: int):
    key = cache_key(CHOICE_KIND, WORKLOAD_VERSION, machine_description(device), device.type, hidden)
    return cache_root() / CHOICE_KIND / f"{key}.json"


def measured_compute(device: torch.device | str, hidden: int | None) -> ComputeChoice:
    """The compute ``dtype=auto`` runs in on ``device`` for a model of width ``hidden`` (768 where unknown):
    read from the cache folder, else measured once (:func:`time_workloads`) and stored; printed once per process."""
    device, hidden = torch.device(device), int(hidden or 768)
    return _DECISIONS.get((machine_description(device), device.type, hidden), lambda: _decide(device, hidden))


def _decide(device: torch.device, hidden: int) -> ComputeChoice:
    path = _choice_path(device, hidden)
    try:
        choice = ComputeChoice(**json.loads(path.read_text(encoding="utf-8")))
        how = "measured earlier"
    except (OSError, ValueError, TypeError):  # none yet, or an unreadable one: measure again
        unavailable = lower_computes(device)
        native = tuple(compute for compute, why in unavailable.items() if why is None)
        seconds = time_workloads(device, ("fp32", *native), hidden) if native else {"fp32": float("nan")}
        compute, reason = choose_compute(seconds, unavailable)
        choice = ComputeChoice(compute, reason, seconds, machine_description(device), hidden, datetime.now(timezone.utc).isoformat(timespec="seconds"))
        how = "measured now"
        try:
            mark_recomputable(cache_dir(CHOICE_KIND))
            atomic_write_text(path, json.dumps(asdict(choice), indent=1, sort_keys=True))
        except OSError:
            pass  # a read-only cache: the decision holds for this process
    status(f"dtype=auto: {choice.compute} on {choice.machine} for width {hidden} ({how}: {choice.reason})")
    return choice


def stored_choices() -> list[ComputeChoice]:
    """Every decision in the cache folder (``embedlab cache info``), oldest first."""
    folder = cache_root(create=False) / CHOICE_KIND
    choices = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            choices.append(ComputeChoice(**json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(choices, key=lambda choice: choice.measured_at)


def resolve_compute(dtype: str, quantize: str, device: torch.device | str = "cpu", hidden: int | None = None) -> str:
    """The compute a spec's ``dtype=`` and ``quantize=`` ask for on ``device``: ``auto`` becomes the fastest
    native compute within the quality budget, measured once per machine on a workload of width ``hidden``
    (:func:`measured_compute`); an explicit bf16 without native support warns (it runs, slowly)."""
    if quantize == "int8":
        return "int8"
    if dtype == "auto":
        return measured_compute(device, hidden).compute
    if dtype == "bf16" and not native_bf16(device):
        missing = " or ".join(NATIVE_BF16_FLAGS)
        warnings.warn(f"dtype=bf16: this CPU has no native bf16 ({missing} missing from its flags, torch capability "
                      f"{torch.backends.cpu.get_cpu_capability()}); torch emulates it, slower than fp32. "
                      "dtype=auto picks bf16 only where it is native", RuntimeWarning, stacklevel=3)
    return dtype
