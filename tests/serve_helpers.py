"""What the serve tests (tests/serve/) share: a tiny random BERT (tests/conformance/tiny_models.py), a real
uvicorn server on a free port of 127.0.0.1 run on a thread of the test's process, and reading /metrics."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conformance.tiny_models import build_tiny

TEXTS = ["a man is playing guitar on the stage", "two dogs run through snow", "stock market fell sharply tuesday",
         "a woman slices an onion in the kitchen", "the crowd cheered"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny("BERT", tmp_path_factory.mktemp("serve") / "model")


@contextlib.contextmanager
def thread_server(served: dict, **options) -> Iterator[str]:
    """``create_app(served)`` on uvicorn on a free port; yields its URL, stops it (and its batchers) after."""
    from embedlab.serve.app import create_app
    from embedlab.serve.service import ServeOptions
    from embedlab.serve.server import listen

    listener = listen(create_app(served, ServeOptions(**options)), "127.0.0.1", 0)
    thread = threading.Thread(target=listener.run, name="serve-test", daemon=True)
    thread.start()
    try:
        yield listener.url
    finally:
        listener.server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server did not stop"


def metric(url: str, name: str, headers: dict | None = None, **labels: str) -> float:
    """One sample of ``/metrics`` (0 when absent), read with prometheus-client's own parser."""
    text = httpx.get(f"{url}/metrics", headers=headers, trust_env=False).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and all(sample.labels.get(key) == value for key, value in labels.items()))


def wait_for(condition, timeout_s: float = 10.0) -> None:
    """Poll ``condition`` every 10 ms until it holds; fail after ``timeout_s`` (the loop is bounded)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)
