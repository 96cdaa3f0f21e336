"""embedlab/serve/server.py, as a user runs it: ``embedlab serve`` in its own process on a free port of
127.0.0.1. A client killed while its request waits for a batch disturbs no other request; SIGTERM under
load answers every request in flight, then the program exits with status 0.

The server waits up to a second for requests to join a batch (``--max-wait-ms 1000``), so that requests
are reliably in flight when the client is killed or the signal arrives (read from /metrics, not timed).
"""

from __future__ import annotations

import re
import signal
import sys
import threading

import httpx
import numpy as np
import pytest

import embedlab
import preloaded
from serve_helpers import TEXTS, metric, tiny_model, wait_for  # noqa: F401 - tiny_model: a fixture
from tolerance import UNIT_ATOL

pytestmark = pytest.mark.xdist_group("serve-process")  # one server process for the module, on one worker

CLIENT = """
import sys, httpx
httpx.post(sys.argv[1] + "/v1/embeddings", json={"model": "tiny", "input": ["a man"]}, timeout=60, trust_env=False)
"""


@pytest.fixture(scope="module")
def server(tiny_model):
    process = preloaded.Popen([sys.executable, "-m", "embedlab", "serve", str(tiny_model), "--name", f"tiny={tiny_model}",
                               "--port", "0", "--max-wait-ms", "1000", "--quiet"],
                              stdout=preloaded.PIPE, stderr=preloaded.PIPE, text=True)
    line = process.stdout.readline().strip()
    match = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+)", line)
    try:
        assert match, f"unexpected first line {line!r}; stderr: {process.stderr.read() if process.poll() is not None else ''}"
        yield process, match.group(1)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _embed(url: str, texts: list[str]) -> httpx.Response:
    return httpx.post(f"{url}/v1/embeddings", json={"model": "tiny", "input": texts, "encoding_format": "float"}, timeout=60, trust_env=False)


@pytest.mark.crosspath
def test_a_killed_client_disturbs_no_other_request(server, tiny_model) -> None:
    process, url = server
    client = preloaded.Popen([sys.executable, "-c", CLIENT, url])
    try:
        wait_for(lambda: metric(url, "embedlab_queue_depth") == 1)  # its request waits for the batch
        answers = []
        other = threading.Thread(target=lambda: answers.append(_embed(url, TEXTS[:2])))
        other.start()
        wait_for(lambda: metric(url, "embedlab_queue_depth") == 2)
    finally:
        client.kill()
    assert client.wait(timeout=30) == -signal.SIGKILL
    other.join(timeout=30)
    # served in the server's batches vs in-process encode: float32 rounding
    np.testing.assert_allclose([item["embedding"] for item in answers[0].json()["data"]], embedlab.load(str(tiny_model)).encode(TEXTS[:2]),
                               rtol=0, atol=UNIT_ATOL)
    wait_for(lambda: metric(url, "embedlab_client_disconnects_total", route="/v1/embeddings") == 1)
    assert metric(url, "embedlab_batch_texts_sum") == 2  # the killed client's text was dropped from the batch
    assert process.poll() is None and _embed(url, TEXTS[2:3]).status_code == 200


@pytest.mark.crosspath
def test_sigterm_answers_the_requests_in_flight_then_exits_cleanly(server, tiny_model) -> None:
    process, url = server
    answers: dict[int, httpx.Response] = {}
    threads = [threading.Thread(target=lambda index=index: answers.update({index: _embed(url, TEXTS[index:index + 2])}))
               for index in range(4)]
    waiting = metric(url, "embedlab_queue_depth")
    for thread in threads:
        thread.start()
    wait_for(lambda: metric(url, "embedlab_queue_depth") == waiting + 4)  # all four in flight, none answered
    process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(timeout=60)
    expected = embedlab.load(str(tiny_model)).encode(TEXTS)
    for index in range(4):
        assert answers[index].status_code == 200
        np.testing.assert_allclose([item["embedding"] for item in answers[index].json()["data"]], expected[index:index + 2], rtol=0, atol=UNIT_ATOL)
    assert process.wait(timeout=60) == 0
    assert "Traceback" not in process.stderr.read()
    with pytest.raises(httpx.ConnectError):  # gone: nothing listens any more
        _embed(url, TEXTS[:1])


def test_the_server_runs_on_uvloop_and_httptools() -> None:
    """Named, not left to uvicorn's "auto" (which falls back to asyncio and h11 without a word): on asyncio's loop
    one client's small requests waited about twice as long (embedlab.serve.server)."""
    import uvloop
    from fastapi import FastAPI
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from embedlab.serve.server import listen

    listener = listen(FastAPI(), port=0)
    try:
        config = listener.server.config
        config.load()
        assert config.http_protocol_class is HttpToolsProtocol
        assert config.loop == "uvloop"
        loop = config.get_loop_factory()() if hasattr(config, "get_loop_factory") else None
        if loop is not None:
            assert isinstance(loop, uvloop.Loop)
            loop.close()
    finally:
        listener.socket.close()
