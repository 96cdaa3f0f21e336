"""embedlab/serve/batching.py: a request larger than a batch is split so that a small request waits at most one
batch, its parts are joined back in order, and the parts of a request whose client went away are dropped.

The served method is a gate: each ``encode`` call is recorded and waits until the test lets it end, so which
texts go into which call is read from the calls, not from timing."""

from __future__ import annotations

import threading

import httpx
import numpy as np

from embedlab.methods.base import VectorMethod
from embedlab.serve.served import ServedMethod
from serve_helpers import metric, thread_server, wait_for


class GatedMethod(VectorMethod):
    """Vector i of a text is its length + i; every encode call is recorded, then waits for the gate."""

    def __init__(self) -> None:
        super().__init__("gated")
        self.calls: list[list[str]] = []
        self.gate = threading.Semaphore(0)

    @property
    def fingerprint(self) -> str:
        return "gated"

    @property
    def dimension(self) -> int:
        return 4

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        self.calls.append(list(texts))
        assert self.gate.acquire(timeout=30), "the test never opened the gate"
        return np.array([[len(text) + index for index in range(4)] for text in texts], dtype=np.float32)


def word_tokens(texts: list[str], add_special_tokens: bool = True) -> dict[str, list[list[str]]]:
    return {"input_ids": [text.split() for text in texts]}  # one token per word


def embed(url: str, texts: list[str], answers: dict, key: str, timeout: float = 30) -> None:
    try:
        answers[key] = httpx.post(f"{url}/v1/embeddings", json={"model": "gated", "input": texts, "encoding_format": "float"},
                                  trust_env=False, timeout=timeout)
    except httpx.TimeoutException as error:
        answers[key] = error


def gated_server(**options):
    method = GatedMethod()
    return method, thread_server({"gated": ServedMethod("gated", method, word_tokens)}, max_wait_ms=0, **options)


def expected_rows(texts: list[str]) -> list[list[float]]:
    return [[len(text) + index for index in range(4)] for text in texts]


def test_a_large_request_is_split_and_a_small_one_goes_before_its_next_part() -> None:
    big = [f"long text number {index}" for index in range(6)]  # 4 tokens each; 8 tokens a batch: 2 texts
    method, server = gated_server(max_batch_tokens=8)
    with server as url:
        answers: dict = {}
        big_client = threading.Thread(target=embed, args=(url, big, answers, "big"))
        big_client.start()
        wait_for(lambda: len(method.calls) == 1)  # the first part runs and waits at the gate
        small_client = threading.Thread(target=embed, args=(url, ["short one"], answers, "small"))
        small_client.start()
        wait_for(lambda: metric(url, "embedlab_queue_depth") == 1)  # the small request waits for the model
        method.gate.release()
        wait_for(lambda: len(method.calls) == 2)
        assert method.calls == [big[:2], ["short one", big[2]]]  # the small request first, the budget filled with the big one
        method.gate.release()
        small_client.join(timeout=30)
        assert answers["small"].json()["data"][0]["embedding"] == expected_rows(["short one"])[0]
        assert big_client.is_alive()  # answered while the big request still has a part to run
        for _ in range(2):
            method.gate.release()
        big_client.join(timeout=30)
    assert method.calls[2:] == [big[3:5], big[5:]]
    assert [item["embedding"] for item in answers["big"].json()["data"]] == expected_rows(big)  # the parts joined in order


def test_the_parts_of_a_request_whose_client_went_away_are_dropped() -> None:
    big = [f"long text number {index}" for index in range(6)]
    method, server = gated_server(max_batch_tokens=8)
    with server as url:
        answers: dict = {}
        client = threading.Thread(target=embed, args=(url, big, answers, "big", 0.5))  # gives up after half a second
        client.start()
        wait_for(lambda: len(method.calls) == 1)
        client.join(timeout=30)
        wait_for(lambda: metric(url, "embedlab_client_disconnects_total", route="/v1/embeddings") == 1)
        method.gate.release()
        method.gate.release()  # would let a second part run, if one were taken
        answers.clear()
        embed_thread = threading.Thread(target=embed, args=(url, ["after"], answers, "after"))
        embed_thread.start()
        embed_thread.join(timeout=30)
        assert answers["after"].status_code == 200
    assert method.calls == [big[:2], ["after"]]  # nothing more of the abandoned request ran
