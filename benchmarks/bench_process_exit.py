"""How long a finished process takes to exit: the embedlab program (``run``: ``main``, then ``gc.freeze()``)
against ``main`` alone, and a Ray encoder actor with and without its ``gc.freeze()``.

A process that loaded a model holds millions of objects; at exit the interpreter's last garbage collection
walks them all. The CLI case runs ``embedlab embed minilm`` on two texts in a child process that prints a
timestamp when the command has returned, and the parent notes when the child is gone: that difference is
the exit. The two variants alternate, so a change in the machine's load hits both. The Ray case starts a
local Ray (two CPUs), encodes 40 texts on a pool of two actors that import torch, and times how long the
actor processes outlive the run (a finished actor keeps its CPU until its process is gone, and the next
pool waits for it).

    python benchmarks/bench_process_exit.py [--repeats 5] [--ray]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

CLI = """
import sys, time
from embedlab.cli import app
variant, sys.argv = sys.argv[1], ["embedlab", *sys.argv[2:]]
status = app.main() if variant == "main" else app.run()
print("returned", time.time(), flush=True)
sys.exit(status)
"""

ACTOR = """
import gc, os, subprocess, sys, time
import numpy as np
import ray, ray.data

class Encoder:
    def __init__(self, freeze):
        import torch  # what an embedlab actor holds, short of the model
        self.torch = torch
        if freeze:
            gc.freeze()

    def __call__(self, batch):
        return {"id": batch["id"], "vector": np.zeros((len(batch["id"]), 4), np.float32)}

def actors():
    return set(map(int, subprocess.run(["pgrep", "-f", "MapWorker"], capture_output=True, text=True).stdout.split()))

ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
freeze = sys.argv[1] == "freeze"
dataset = ray.data.from_items([{"id": index} for index in range(40)], override_num_blocks=4)
encoded = dataset.map_batches(Encoder, batch_size=10, num_cpus=1, fn_constructor_args=(freeze,),
                              compute=ray.data.ActorPoolStrategy(size=2))
rows = sum(len(batch["id"]) for batch in encoded.iter_batches(batch_size=None, batch_format="numpy"))
finished, running = time.time(), actors()
while actors() & running and time.time() - finished < 120:
    time.sleep(0.1)
print("gone after", time.time() - finished, flush=True)
ray.shutdown()
"""


def cli_exit(variant: str, texts: Path, out: Path) -> float:
    arguments = ["embed", "minilm", "--input", str(texts), "--out", str(out), "--quiet"]
    child = subprocess.Popen([sys.executable, "-c", CLI, variant, *arguments], stdout=subprocess.PIPE, text=True,
                             cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)})
    returned = float(next(line for line in child.stdout if line.startswith("returned")).split()[1])
    child.wait()
    return time.time() - returned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ray", action="store_true", help="also time Ray actors' exit (needs ray[data])")
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory() as folder:
        texts = Path(folder) / "texts.txt"
        texts.write_text("A man plays a guitar.\nA woman reads a book.\n", encoding="utf-8")
        times: dict[str, list[float]] = {"main": [], "run": []}
        for repeat in range(options.repeats):
            for variant in (("main", "run") if repeat % 2 == 0 else ("run", "main")):
                times[variant].append(cli_exit(variant, texts, Path(folder) / f"{variant}.npy"))
    plain, frozen = statistics.median(times["main"]), statistics.median(times["run"])
    print(f"CLI exit, median of {options.repeats}: main alone {plain:.2f} s, run (frozen) {frozen:.2f} s, {plain / frozen:.1f}x")
    if options.ray:
        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder) / "actors.py"  # a file, not -c: pgrep -f must not find the driver's own command line
            script.write_text(ACTOR, encoding="utf-8")
            ray_runs = [subprocess.run([sys.executable, str(script), variant], capture_output=True, text=True,
                                       env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}).stdout
                        for variant in ("plain", "freeze", "plain", "freeze")]
        for variant, output in zip(("plain", "freeze", "plain", "freeze"), ray_runs):
            gone = next(line for line in output.splitlines() if line.startswith("gone after")).split()[2]
            print(f"Ray actors ({variant}) gone {float(gone):.1f} s after the run")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
