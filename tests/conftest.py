"""Shared fixtures: offline hub, the real default model, and small slices of the real data."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from embedlab.paths import data_path


@pytest.fixture(scope="session")
def minilm():
    from embedlab.models import load_model

    return load_model("minilm")


@pytest.fixture(scope="session")
def sts_test_rows() -> list[tuple[float, str, str]]:
    """(score, sentence 1, sentence 2) of the STS-B test split."""
    rows = []
    with open(data_path("sts", "STSBenchmark", "sts-test.csv"), encoding="utf-8") as stream:
        for line in stream:
            fields = line.rstrip("\n").split("\t")
            rows.append((float(fields[4]), fields[5], fields[6]))
    return rows


@pytest.fixture(scope="session")
def sts_sentences(sts_test_rows) -> list[str]:
    """The first 60 unique sentences of STS-B test."""
    return list(dict.fromkeys(text for _, a, b in sts_test_rows[:40] for text in (a, b)))[:60]


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A private, empty cache root for tests that inspect or damage cache entries."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    from embedlab import token_states

    monkeypatch.setattr(token_states, "_STORES", {})
    return tmp_path / "cache"
