"""`embedlab serve minilm` under 64 concurrent clients against in-process `encode` of the same requests.

The request stream (seeded): 64 clients × 50 requests, each of 1–16 sentences drawn from STS-B
(train, dev and test). In-process, each request is one `encode` call, in stream order; served, each
client sends its 50 requests one after another over HTTP (`/v1/embeddings`, base64 as the openai client
asks by default) to a real `embedlab serve` process on 127.0.0.1, all 64 clients at once. Neither side
stores token states and the cache starts empty, so both compute every text. Checked: no request fails,
and every served vector is within 1e-6 of the in-process one. Printed: texts/s of both and their ratio
(target ≥ 0.9×), p50/p99 request latency, the mean coalesced batch. Traffic goes only to 127.0.0.1; every
request and the whole run have time limits, and the server is stopped (SIGTERM) at the end.

The spec served is `minilm:post=normalize` (all-MiniLM-L6-v2 as its sentence-transformers model card
serves it: unit vectors, = `st:minilm`); `--spec minilm` serves the raw mean-pooled vectors (norms ≈ 6,
so the same relative rounding is ≈ 6× larger in absolute terms). A text's vector depends on the batch it
is padded with at the level of float32 rounding, in-process as served, hence the 1e-6 tolerance.

    python benchmarks/bench_serve.py [--spec minilm:post=normalize] [--clients 64] [--requests 50] [--seed 0] [--encoding base64|float]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import signal
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx
import numpy as np
from _common import fresh_cache

import embedlab
from embedlab.data.sts import stsb
from embedlab.runtime.settings import token_states_uncached

MODEL = "bench"  # the alias requests use
REQUEST_TIMEOUT_S = 300
RUN_TIMEOUT_S = 3600


def stsb_sentences() -> list[str]:
    """The distinct sentences of STS-B train, dev and test, in file order."""
    splits = [stsb(split) for split in ("train", "dev", "test")]
    return list(dict.fromkeys(text for split in splits for pair in zip(split.first, split.second) for text in pair))


def request_stream(sentences: list[str], clients: int, requests: int, seed: int) -> list[list[list[str]]]:
    """Each client's requests: lists of 1–16 sentences drawn with one seeded generator."""
    rng = np.random.default_rng(seed)
    return [[[sentences[i] for i in rng.choice(len(sentences), int(rng.integers(1, 17)), replace=False)]
             for _ in range(requests)] for _ in range(clients)]


def in_process(spec: str, stream: list[list[list[str]]]) -> tuple[float, list[list[np.ndarray]]]:
    method = embedlab.load(spec)
    method.encode(["warm up the model"])
    start = time.perf_counter()
    with token_states_uncached():  # as the server: every text computed, nothing stored
        vectors = [[method.encode(texts) for texts in client] for client in stream]
    return time.perf_counter() - start, vectors


def start_server(spec: str, cache: str) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, "-m", "embedlab", "serve", spec, "--name", f"{MODEL}={spec}", "--port", "0", "--quiet"],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "EMBEDLAB_CACHE": cache})
    line = server.stdout.readline().strip()
    match = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not match:
        server.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return server, match.group(1)


def decode(item: dict, encoding: str) -> np.ndarray:
    if encoding == "base64":
        return np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
    return np.asarray(item["embedding"], dtype=np.float32)


async def run_client(client: httpx.AsyncClient, url: str, requests: list[list[str]], encoding: str,
                     latencies: list[float], results: list, route: str = "/v1/embeddings", model: str = MODEL) -> None:
    for texts in requests:
        start = time.perf_counter()
        try:
            response = await client.post(f"{url}{route}", json={"model": model, "input": texts, "encoding_format": encoding})
        except httpx.HTTPError as error:
            results.append(error)
            continue
        latencies.append(time.perf_counter() - start)
        results.append(response if response.status_code != 200 else
                       np.stack([decode(item, encoding) for item in response.json()["data"]]))


async def served(url: str, stream: list[list[list[str]]], encoding: str, route: str = "/v1/embeddings",
                 model: str = MODEL) -> tuple[float, list[float], list[list]]:
    """Every client of ``stream`` at once against ``url`` (``route``: infinity serves ``/embeddings``)."""
    limits = httpx.Limits(max_connections=len(stream), max_keepalive_connections=len(stream))
    async with httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
        await client.post(f"{url}{route}", json={"model": model, "input": ["warm up"]})
        latencies: list[float] = []
        results: list[list] = [[] for _ in stream]
        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(run_client(client, url, requests, encoding, latencies, results[index], route, model)
                                                for index, requests in enumerate(stream))), RUN_TIMEOUT_S)
        return time.perf_counter() - start, latencies, results


def mean_batch(url: str) -> float:
    text = httpx.get(f"{url}/metrics", trust_env=False).text
    total = float(re.search(r'^embedlab_batch_texts_sum\{[^}]*\} (\S+)', text, re.M).group(1))
    count = float(re.search(r'^embedlab_batch_texts_count\{[^}]*\} (\S+)', text, re.M).group(1))
    return total / count


def cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="minilm:post=normalize")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encoding", choices=("base64", "float"), default="base64")
    args = parser.parse_args()

    print(f"cpu: {cpu_model()} ({os.cpu_count()} cores); load average at start: {os.getloadavg()}")
    stream = request_stream(stsb_sentences(), args.clients, args.requests, args.seed)
    texts = sum(len(request) for client in stream for request in client)
    cache = fresh_cache("minilm")
    local_s, reference = in_process(args.spec, stream)
    server, url = start_server(args.spec, cache)
    try:
        served_s, latencies, results = asyncio.run(served(url, stream, args.encoding))
        batch = mean_batch(url)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    errors = [result for client in results for result in client if not isinstance(result, np.ndarray)]
    pairs = [(result, expected) for client, expected_client in zip(results, reference)
             for result, expected in zip(client, expected_client) if isinstance(result, np.ndarray)]
    worst = max((float(np.abs(result - expected).max()) for result, expected in pairs), default=float("nan"))
    worst_relative = max((float((np.abs(result - expected).max(axis=1) / np.linalg.norm(expected, axis=1)).max())
                          for result, expected in pairs), default=float("nan"))
    print(f"spec {args.spec}; requests: {args.clients} clients x {args.requests} = {args.clients * args.requests}, texts: {texts}, encoding {args.encoding}")
    print(f"in-process encode: {local_s:.1f} s, {texts / local_s:.1f} texts/s")
    print(f"served:            {served_s:.1f} s, {texts / served_s:.1f} texts/s; mean batch {batch:.1f} texts")
    print(f"throughput ratio served / in-process: {local_s / served_s:.3f}x (target >= 0.9)")
    print(f"latency p50 {np.percentile(latencies, 50) * 1000:.0f} ms, p99 {np.percentile(latencies, 99) * 1000:.0f} ms")
    print(f"errors: {len(errors)} {errors[:3]}; largest |served - in-process|: {worst:.2e} (must be <= 1e-6), "
          f"relative to the vector's norm {worst_relative:.2e}")
    print(f"server exit status after SIGTERM: {server.returncode}; load average at end: {os.getloadavg()}")
    if errors or not worst <= 1e-6:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
