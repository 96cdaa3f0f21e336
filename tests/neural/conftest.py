"""Fixtures of the neural tests: the MiniLM masked LM (shipped head) and a few short sentences."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def masked_minilm():
    from embedlab.neural.head import load_masked_lm

    return load_masked_lm("minilm")


@pytest.fixture(scope="session")
def sentences() -> list[str]:
    return [
        "A man is playing a guitar on the stage.",
        "Two dogs run through the snow.",
        "The stock market fell sharply on Tuesday after the announcement.",
    ]
