"""Compute precision: the dtype a transformer runs in (fp32, bf16, fp16) or int8 dynamic linear layers.

A model's *compute* is one word: ``fp32`` (the default, exact), ``bf16``, ``fp16`` or ``int8``. It is
applied when the model is loaded (``AutoModel.from_pretrained(dtype=...)``: a GGUF's converted folder is
read straight into bf16, never converted twice) and enters the model's fingerprint, so token-state cache
keys, static tables, method fingerprints, results rows and shard manifests of two computes never meet.
fp32 adds nothing: its identities are byte-identical to those of the releases before compute existed.

``int8`` is torch's dynamic quantisation of ``nn.Linear`` (per-channel weights, activations quantised per
batch) through its x86 engine: it needs no other package and keeps every hidden state, so ``layers=``,
templates, idf and matching work unchanged. ONNX Runtime's int8 export returns the last layer only (the
graph would have to be re-exported per layer set) and is not installable beside transformers 5 here; see
docs/precision.md for the measurements. The FFN output projection of each block (``*.output.dense``
outside attention) stays in float: it reads GELU activations with outliers that per-tensor activation
scales cannot hold, and quantising it cost 0.012 STS-B Spearman on MiniLM (0.004 without it). The last
block stays in float too: its error reaches the output unattenuated (0.002 Spearman without it).

bf16 is only fast where the CPU computes it natively (AVX-512 BF16 or AMX); elsewhere torch emulates it,
several times slower than fp32. :func:`native_bf16` reads torch's CPU capability and the CPU flags; an
explicit ``bf16`` there warns naming the missing flag. Native is necessary, not sufficient (an Intel Xeon
with AVX-512 BF16 encoded 0.72× its fp32), so ``auto`` measures (:mod:`embedlab.models.compute_choice`).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch

from embedlab.runtime.memo import cached

COMPUTES = ("fp32", "bf16", "fp16", "int8")
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.float32}
# The FFN output projections of BERT-like encoders, Llama-like decoders, GPT-2 and OPT-like models.
FFN_OUTPUT_NAMES = ("output.dense", "mlp.down_proj", "mlp.c_proj", "fc2")
_BLOCK = re.compile(r"(^|\.)(\d+)\.")  # a numbered block in a module name: layer.5., layers.11., h.3.
# CPU flags (Linux /proc/cpuinfo names) under which torch's oneDNN kernels compute bf16 natively.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@cached("cpu flags")
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty where /proc/cpuinfo does not exist)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def native_bf16(device: torch.device | str = "cpu") -> bool:
    """Whether ``device`` computes bf16 natively: a CUDA GPU that supports it, or a CPU with AVX-512 BF16
    or AMX that torch's kernels use (its CPU capability is AVX-512 or above, not plain AVX2)."""
    if torch.device(device).type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    capability = torch.backends.cpu.get_cpu_capability()
    return capability.startswith("AVX512") and any(flag in cpu_flags() for flag in NATIVE_BF16_FLAGS)


def fingerprint_suffix(compute: str) -> str:
    """What a compute adds to a model's fingerprint: nothing for fp32 (identities as before), ``-bf16`` …"""
    return "" if compute == "fp32" else f"-{compute}"


def is_float_output_projection(name: str) -> bool:
    """The FFN output projection of a block (``layer.3.output.dense``, not ``attention.output.dense``),
    which int8 compute keeps in float (see the module docstring)."""
    return name.endswith(FFN_OUTPUT_NAMES) and "attention" not in name


def _last_block(names: list[str]) -> str | None:
    """The name prefix of the model's last numbered block (``encoder.layer.5.``), None without blocks."""
    numbered = [match for name in names if (match := _BLOCK.search(name))]
    if not numbered:
        return None
    last = max(numbered, key=lambda match: int(match.group(2)))
    return last.string[: last.end()]


def quantize_linear_int8(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its ``nn.Linear`` layers dynamically quantised to int8 (per-channel weights), on CPU,
    but for the FFN output projections and the last block (see the module docstring)."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    linear = [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]
    last = _last_block(linear)
    chosen = {name: per_channel_dynamic_qconfig for name in linear
              if not is_float_output_projection(name) and not (last and name.startswith(last))}
    with warnings.catch_warnings():  # torch points eager quantisation users at torchao, which is not installed here
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model.to("cpu"), chosen, dtype=torch.qint8)
