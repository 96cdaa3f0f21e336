"""Where micro-tuning runs and how many texts go into one batched group.

The batched path (:mod:`~embedlab.neural.batched`) is matrix products over per-text rows, the work a GPU
does fastest, so it runs on the model's device: ``device=auto`` picks CUDA where torch sees it, else the
CPU. A group's size comes from a memory budget: on CUDA a fraction of the device's free memory
(``torch.cuda.mem_get_info``), on the CPU an explicit budget (``memory=``; without one the CPU keeps its
measured default of :data:`CPU_GROUP_POSITIONS` masked positions, so CPU results stay what they were).
The budget is an estimate (:func:`group_bytes`); a group that still runs out of memory is split in half
and retried (:func:`embedlab.neural.family.embed_texts_variants`).

TF32: float32 matrix products on Ampere and later GPUs may round their inputs to TF32 (10-bit mantissa)
when ``torch.set_float32_matmul_precision`` allows it; :func:`full_float32` pins "highest" (IEEE
float32) for the duration of a micro-tuning run, so GPU and CPU differ only by summation order.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import torch

from embedlab.errors import InputError
from embedlab.runtime.settings import parse_size

DEVICES_HELP = "auto (CUDA where present, else CPU), cpu, cuda or cuda:N"
# Masked positions per batched group on the CPU without a budget (measured default; results unchanged).
CPU_GROUP_POSITIONS = 4096
# Upper bound on CUDA: a group's one-hot row selection costs positions × texts × hidden per tuned vector,
# which grows with the square of the group, so groups larger than this gain nothing from more memory
# (2,000 STS-B texts on an H200: 32,768 positions 3 % faster than 16,384 exact, 16 % with candidate sets).
CUDA_GROUP_POSITIONS = 32768
# Fraction of the free device memory one group may plan for (the rest: the allocator's slack, other work).
FREE_MEMORY_FRACTION = 0.5
# Positions per logits slice: the CPU's measured best (see micro_tune_batched); larger GEMMs on CUDA.
CPU_POSITION_BUDGET = 256
CUDA_POSITION_BUDGET = 2048
# Candidate epochs' chunks (padding slack, gathered output-embedding values; candidate_epochs.chunk_texts):
# the CPU's measured choice; on CUDA fewer, larger chunks, since a kernel launch there costs more than the
# padded work it saves (a group of 190 STS-B texts: 8 chunks on the CPU, 3 on CUDA at 1.43x padded work).
CPU_CHUNKING = (1.25, 1 << 24)
CUDA_CHUNKING = (1.5, 1 << 26)
# Tokens per frozen forward (texts of one row shape together; neural/frozen.py): the CPU's measured best;
# on CUDA as many as a group holds (a forward's launches, not its size, cost the time there).
CPU_FORWARD_TOKENS = 1024
CUDA_FORWARD_TOKENS = 1 << 16


def check_device(value: str) -> str:
    """A ``device=`` option value, canonical (``cuda:0`` stays as given); a clear error for anything else."""
    value = value.strip().lower()
    if value in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", value):
        return value
    raise ValueError(f"must be {DEVICES_HELP}")


def resolve_device(value: str) -> torch.device:
    """The torch device a ``device=`` value names; CUDA asked for where torch sees none is an error, not a fallback."""
    value = check_device(value)
    if value == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(value)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"neural: device={value} but torch sees no CUDA device (torch {torch.__version__}); use device=cpu or auto")
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise InputError(f"neural: device={value} but torch sees {torch.cuda.device_count()} CUDA device(s)")
        device = torch.device("cuda", index)
    return device


def parse_bytes(value: str) -> int:
    """``512MB``, ``2GB``, ``1.5GB`` or a plain byte count as bytes (binary units, as :func:`embedlab.runtime.settings.parse_size`
    reads ``EMBEDLAB_CACHE_MAX``); a budget must be positive."""
    size = parse_size(value, "memory")
    if size <= 0:
        raise ValueError(f"must be a positive size, got {value!r}")
    return size


def check_memory(value: str) -> str:
    """A ``memory=`` option value: ``auto`` or a size (canonical: bytes)."""
    return "auto" if value.strip().lower() == "auto" else str(parse_bytes(value))


def memory_budget(device: torch.device, memory: str = "auto", fraction: float = FREE_MEMORY_FRACTION) -> int | None:
    """Bytes one batched group may plan for: the explicit ``memory`` size, else (CUDA) ``fraction`` of
    the device's free memory, else None (CPU without a budget: the default group size)."""
    if memory != "auto":
        return parse_bytes(memory)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * fraction)
    return None


def group_bytes(positions: int, hidden: int, vocabulary: int, position_budget: int, candidates: int | None) -> int:
    """An upper estimate of a group's float32 working set, for ``positions`` masked positions.

    Per position: its frozen features, fixed dense input, epoch-1 decoder input z₀ and residual mean μ₀
    (4 × hidden), and with the candidate-set softmax its share of the gathered output embeddings (at
    most ``candidates + 1`` rows of ``hidden`` per position: the union of its top-K and its label).
    Per group: one logits slice with its softmax and gradient (3 × ``position_budget`` × vocabulary),
    the one-hot row selection (``position_budget`` × texts ≤ positions), and the frozen forward of
    about 1,024 tokens (≈ 16 × hidden values a token, attention included for BERT-sized models).
    """
    per_position = 4 * hidden + 8
    if candidates is not None:
        per_position += (candidates + 1) * hidden
    fixed = 3 * position_budget * vocabulary + position_budget * positions + 1024 * 16 * hidden
    return 4 * (positions * per_position + fixed)


def group_positions_for(budget: int | None, device: torch.device, hidden: int, vocabulary: int, position_budget: int, candidates: int | None) -> int:
    """Masked positions per batched group: the most whose :func:`group_bytes` fit ``budget`` (≥ 1), capped
    by the device's default (:data:`CPU_GROUP_POSITIONS`, :data:`CUDA_GROUP_POSITIONS`)."""
    cap = CUDA_GROUP_POSITIONS if device.type == "cuda" else CPU_GROUP_POSITIONS
    if budget is None:
        return cap
    low, high = 1, cap
    while low < high:  # group_bytes grows with positions: the largest that fits
        middle = (low + high + 1) // 2
        if group_bytes(middle, hidden, vocabulary, position_budget, candidates) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def position_budget_for(device: torch.device) -> int:
    return CUDA_POSITION_BUDGET if device.type == "cuda" else CPU_POSITION_BUDGET


def forward_tokens_for(device: torch.device) -> int:
    """Tokens per frozen forward on ``device`` (texts whose rows share a shape run together)."""
    return CUDA_FORWARD_TOKENS if device.type == "cuda" else CPU_FORWARD_TOKENS


def chunking_for(device: torch.device) -> tuple[float, int]:
    """(padding slack, values per chunk) of the candidate epochs' chunks on ``device``."""
    return CUDA_CHUNKING if device.type == "cuda" else CPU_CHUNKING


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an allocation failure (CUDA's OutOfMemoryError, or the CPU allocator's)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and ("out of memory" in str(error).lower() or "can't allocate memory" in str(error).lower())


def release_device_memory(device: torch.device) -> None:
    """After an out-of-memory error: hand the caching allocator's free blocks back before retrying."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """float32 matrix products at full IEEE precision (no TF32) inside; the caller's setting restored after."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device
