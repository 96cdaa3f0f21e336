"""Shared fixtures: offline hub, the real default model, and small slices of the real data."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest


@pytest.fixture(scope="session")
def minilm():
    from embedlab.models import load_model

    return load_model("minilm")


@pytest.fixture(scope="session")
def sts_test_rows() -> list[tuple[float, str, str]]:
    """(score, sentence 1, sentence 2) of the STS-B test split."""
    from embedlab.data.datasets import stsb

    test = stsb("test")
    return list(zip(test.scores.tolist(), test.first, test.second))


@pytest.fixture(scope="session")
def sts_sentences(sts_test_rows) -> list[str]:
    """The first 60 unique sentences of STS-B test."""
    return list(dict.fromkeys(text for _, a, b in sts_test_rows[:40] for text in (a, b)))[:60]


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A private, empty cache root for tests that inspect or damage cache entries."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    from embedlab import runtime

    runtime.clear()  # no token states remembered in memory from another cache
    return tmp_path / "cache"
