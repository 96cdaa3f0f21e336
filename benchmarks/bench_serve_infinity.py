"""`embedlab serve minilm:post=normalize` beside infinity-emb serving the same all-MiniLM-L6-v2 folder, under the
same seeded client load (benchmarks/bench_serve.py's stream), in alternating runs.

infinity lives in a virtual environment of its own (its dependencies conflict with embedlab's):
`python -m venv V; V/bin/pip install "torch==2.13.0"; V/bin/pip install "infinity-emb[server,torch]==0.0.78"`; it
is started as `V/bin/infinity_emb v2 --model-id FOLDER --engine torch --device cpu --port P` (fp32, its default
batch size 32) under `HF_HUB_OFFLINE=1`, and answers at `/embeddings`. Both servers run at once, each on
127.0.0.1; the runs alternate (embedlab, infinity, infinity, embedlab, ...) so both see the same load of a
shared machine. Each run sends the whole stream (`--clients` clients at once, each `--requests` requests of
1–16 STS-B sentences, base64 as the openai client asks). Printed per run and as medians: texts/s, p50/p99
request latency; per server its resident memory (VmRSS and peak VmHWM of its process tree); the largest
difference between the two servers' vectors of the same request; errors. Both servers are stopped (SIGTERM,
then SIGKILL) at the end.

    python benchmarks/bench_serve_infinity.py --infinity V/bin/infinity_emb [--clients 64] [--requests 50] [--runs 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx
import numpy as np
from _common import fresh_cache
from bench_serve import MODEL, cpu_model, decode, request_stream, served, start_server, stsb_sentences

from embedlab.models.loading import resolve_model_path

SPEC = "minilm:post=normalize"
START_TIMEOUT_S = 600


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_infinity(executable: str, folder: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([executable, "v2", "--model-id", folder, "--served-model-name", MODEL, "--engine", "torch",
                                "--device", "cpu", "--port", str(port), "--host", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"infinity exited with status {process.returncode} before serving")
        try:
            if httpx.get(f"{url}/health", trust_env=False, timeout=5).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    process.kill()
    raise SystemExit("infinity did not start in time")


def memory_mib(pid: int) -> tuple[float, float]:
    """VmRSS and VmHWM (peak) of ``pid`` and its descendants, in MiB."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    rss = hwm = 0.0
    for member in [str(pid), *children]:
        try:
            with open(f"/proc/{member}/status") as status:
                fields = dict(line.split(":", 1) for line in status)
        except OSError:
            continue
        rss += int(fields["VmRSS"].split()[0]) / 1024
        hwm += int(fields["VmHWM"].split()[0]) / 1024
    return rss, hwm


def stop(process: subprocess.Popen, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after a minute (``group``: the whole session infinity started in)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL) if group else process.kill()
            process.wait(timeout=30)


def one_run(url: str, route: str, stream: list, texts: int) -> dict:
    seconds, latencies, results = asyncio.run(served(url, stream, "base64", route))
    errors = [result for client in results for result in client if not isinstance(result, np.ndarray)]
    return {"texts_s": texts / seconds, "p50": np.percentile(latencies, 50), "p99": np.percentile(latencies, 99),
            "errors": len(errors), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--infinity", required=True, help="the infinity_emb executable of its own virtual environment")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2, help="runs per server, alternating")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"cpu: {cpu_model()} ({os.cpu_count()} cores); load average at start: {os.getloadavg()}")
    stream = request_stream(stsb_sentences(), args.clients, args.requests, args.seed)
    texts = sum(len(request) for client in stream for request in client)
    folder = str(resolve_model_path("minilm"))
    ours, ours_url = start_server(SPEC, fresh_cache("minilm"))
    try:
        theirs, theirs_url = start_infinity(args.infinity, folder)
        try:
            sides = {"embedlab": (ours, ours_url, "/v1/embeddings"), "infinity": (theirs, theirs_url, "/embeddings")}
            runs: dict[str, list[dict]] = {"embedlab": [], "infinity": []}
            for index in range(args.runs * 2):
                name = ["embedlab", "infinity", "infinity", "embedlab"][index % 4]
                _, url, route = sides[name]
                run = one_run(url, route, stream, texts)
                runs[name].append(run)
                print(f"run {index + 1} {name}: {run['texts_s']:.1f} texts/s, p50 {run['p50'] * 1000:.0f} ms, "
                      f"p99 {run['p99'] * 1000:.0f} ms, errors {run['errors']}; load average {os.getloadavg()[0]:.1f}", flush=True)
            memory = {name: memory_mib(process.pid) for name, (process, _, _) in sides.items()}
        finally:
            stop(theirs, group=True)
    finally:
        stop(ours)
    pairs = [(a, b) for a_client, b_client in zip(runs["embedlab"][0]["results"], runs["infinity"][0]["results"])
             for a, b in zip(a_client, b_client) if isinstance(a, np.ndarray) and isinstance(b, np.ndarray)]
    worst = max(float(np.abs(a - b).max()) for a, b in pairs)
    median = {name: {key: float(np.median([run[key] for run in side])) for key in ("texts_s", "p50", "p99")} for name, side in runs.items()}
    print(f"{SPEC} vs infinity-emb, {args.clients} clients x {args.requests} requests = {texts} texts per run, {args.runs} runs each")
    for name in ("embedlab", "infinity"):
        print(f"{name}: median {median[name]['texts_s']:.1f} texts/s, p50 {median[name]['p50'] * 1000:.0f} ms, "
              f"p99 {median[name]['p99'] * 1000:.0f} ms; memory RSS {memory[name][0]:.0f} MiB (peak {memory[name][1]:.0f} MiB); "
              f"errors {sum(run['errors'] for run in runs[name])}")
    print(f"ratio embedlab / infinity: throughput {median['embedlab']['texts_s'] / median['infinity']['texts_s']:.2f}x, "
          f"p50 {median['embedlab']['p50'] / median['infinity']['p50']:.2f}x, p99 {median['embedlab']['p99'] / median['infinity']['p99']:.2f}x, "
          f"peak memory {memory['embedlab'][1] / memory['infinity'][1]:.2f}x")
    print(f"largest |embedlab - infinity| over the first runs' vectors: {worst:.2e}; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
