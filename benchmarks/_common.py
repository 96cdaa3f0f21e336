"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

import os
import tempfile

from embedlab.data.sts import stsb
from embedlab.models.loading import load_model
from embedlab.runtime.settings import cache_root, configure


def sts_test_pairs(count: int | None = None) -> list[tuple[str, str]]:
    """STS-B test sentence pairs in file order (the first ``count`` of them)."""
    test = stsb("test")
    return list(zip(test.first, test.second))[:count]


def sts_test_sentences() -> list[str]:
    """The 2,758 sentences of STS-B test (both sides of its 1,379 pairs, duplicates kept)."""
    test = stsb("test")
    return [sentence for pair in zip(test.first, test.second) for sentence in pair]


_MACHINE_CACHE = None


def fresh_cache(model: str = "minilm", **settings: object) -> str:
    """Point embedlab at a new cache folder with no token states, and forget everything held in memory.

    The machine's reference-corpus caches (WikiText-2 sentences and token statistics, built once per
    machine) are linked in, so a timed run pays for the model and pooling, not for that one-off build.
    ``model`` is loaded again before returning, so a timed run does not pay for loading it either.
    ``settings`` go to ``runtime.configure`` (e.g. ``cache_layers="all"`` for a grid).
    """
    global _MACHINE_CACHE
    if _MACHINE_CACHE is None:
        _MACHINE_CACHE = cache_root()
    folder = tempfile.mkdtemp(prefix="embedlab-bench-")
    for shared in ("corpus", "reference"):
        if (_MACHINE_CACHE / shared).is_dir():
            os.symlink(_MACHINE_CACHE / shared, os.path.join(folder, shared))
    configure(cache_root=folder, **settings)
    load_model(model)
    return folder


def cpu_description() -> str:
    """The CPU model and the vector extensions that decide kernel speed (from /proc/cpuinfo)."""
    import platform

    model, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name") and model == (platform.processor() or "unknown CPU"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    shown = [flag for flag in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8") if flag in flags]
    return f"{model} ({os.cpu_count()} cores; {' '.join(shown) or 'no AVX2'})"
