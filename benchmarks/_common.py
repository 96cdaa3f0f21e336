"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

import os
import tempfile

from embedlab.paths import data_path


def sts_test_sentences() -> list[str]:
    """The 2,758 sentences of STS-B test (both sides of its 1,379 pairs, duplicates kept)."""
    sentences = []
    with open(data_path("sts", "STSBenchmark", "sts-test.csv"), encoding="utf-8") as stream:
        for line in stream:
            fields = line.rstrip("\n").split("\t")
            sentences.extend([fields[5], fields[6]])
    return sentences


def fresh_cache() -> str:
    """Point embedlab at a new, empty cache folder and forget in-memory token states."""
    from embedlab import token_states

    folder = tempfile.mkdtemp(prefix="embedlab-bench-")
    os.environ["EMBEDLAB_CACHE"] = folder
    token_states._STORES.clear()
    return folder
