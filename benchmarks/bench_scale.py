"""Corpus scale: peak memory, cache size and throughput of `embedlab embed minilm` as the corpus grows.

Each run is a separate process (`python -m embedlab embed minilm --input F --out FOLDER`: streamed into
Parquet shards, the way a corpus is embedded) with a fresh,
empty cache folder, so its peak RSS (the child's own ``ru_maxrss``, from ``os.wait4``) and the bytes left
in the cache are its alone. Texts are WikiText-2 train sentences, repeated (in order) up to each size.
Side by side on the same file, sentence-transformers' ``SentenceTransformer(path).encode`` runs in its
own process too (load, read, encode, save), so both times include the same start-up work.

Targets: peak RSS ≤ 1.5 GB; RSS(largest) ≤ 1.2 × RSS(smallest); cache ≤ its budget;
throughput ≥ 0.95 × sentence-transformers; `eval minilm --tasks sts` peak RSS ≤ 2 GB.
Figures are printed, never asserted (timings depend on the machine and on whatever else runs on it).

    python benchmarks/bench_scale.py [--part embed|eval|all] [--sizes 10000,100000] [--st-sizes SIZES] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.models.loading import resolve_model_path
from embedlab.runtime.settings import cache_budget, cache_root

REPO_ROOT = Path(__file__).resolve().parent.parent
ST_ENCODE = """
import sys
import numpy as np
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1])
texts = open(sys.argv[2], encoding="utf-8").read().split("\\n")[:-1]
np.save(sys.argv[3], model.encode(texts, batch_size=int(sys.argv[4])).astype(np.float32), allow_pickle=False)
"""


def measured(command: list[str], cache: Path) -> tuple[float, float]:
    """Run ``command`` with ``cache`` as its EMBEDLAB_CACHE: (wall seconds, peak RSS in GB of that process)."""
    environment = {**os.environ, "EMBEDLAB_CACHE": str(cache), "TRANSFORMERS_OFFLINE": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    child = subprocess.Popen(command, env=environment, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(command)}")
    return seconds, usage.ru_maxrss * 1024 / 1e9  # Linux reports kilobytes


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def corpus_file(size: int, folder: Path) -> Path:
    """``size`` WikiText-2 train sentences, repeated in order, one per line."""
    sentences = wikitext2_sentences("train")
    texts = [sentences[index % len(sentences)] for index in range(size)]
    path = folder / f"wikitext2-{size}.txt"
    path.write_text("".join(text.replace("\n", " ") + "\n" for text in texts), encoding="utf-8")
    return path


def bench_embed(sizes: list[int], st_sizes: set[int], batch_size: int, work: Path) -> None:
    budget = cache_budget()
    rows = []
    for size in sizes:
        corpus = corpus_file(size, work)
        cache = Path(tempfile.mkdtemp(prefix="embedlab-scale-cache-", dir=work))
        ours, ours_rss = measured([sys.executable, "-m", "embedlab", "embed", "minilm", "--input", str(corpus),
                                   "--out", str(work / f"ours-{size}"), "--batch-size", str(batch_size), "--quiet"], cache)
        cached = folder_bytes(cache)
        theirs, theirs_rss = float("nan"), float("nan")
        if size in st_sizes:
            theirs, theirs_rss = measured([sys.executable, "-c", ST_ENCODE, str(resolve_model_path("minilm")), str(corpus),
                                           str(work / "theirs.npy"), str(batch_size)], Path(tempfile.mkdtemp(dir=work)))
        rows.append((size, ours, ours_rss, theirs, theirs_rss, cached))
        print(f"  {size:>7,} texts: embedlab {ours:7.1f} s, peak RSS {ours_rss:.2f} GB, cache {cached / 2**20:7.1f} MiB | "
              f"sentence-transformers {theirs:7.1f} s, peak RSS {theirs_rss:.2f} GB", flush=True)
    print(f"\nembed minilm, WikiText-2 train sentences, batch {batch_size}, fresh cache per run (budget {budget / 2**30:.2f} GiB)")
    print(f"{'texts':>8s} {'RSS GB':>7s} {'ST RSS':>7s} {'cache MiB':>10s} {'cache/budget':>13s} {'texts/s':>8s} {'ST texts/s':>11s} {'vs ST':>6s}")
    for size, ours, ours_rss, theirs, theirs_rss, cached in rows:
        print(f"{size:8,d} {ours_rss:7.2f} {theirs_rss:7.2f} {cached / 2**20:10.1f} {cached / budget:13.3f} "
              f"{size / ours:8.1f} {size / theirs:11.1f} {theirs / ours:5.2f}x")
    peak = max(row[2] for row in rows)
    print(f"peak RSS {peak:.2f} GB (target <= 1.5); largest cache/budget {max(row[5] for row in rows) / budget:.3f} (target <= 1)")
    if len(rows) > 1:
        print(f"RSS({rows[-1][0]:,}) / RSS({rows[0][0]:,}) = {rows[-1][2] / rows[0][2]:.3f} (target <= 1.2)")
    compared = [row for row in rows if row[3] == row[3]]
    print(f"throughput vs sentence-transformers: {', '.join(f'{row[3] / row[1]:.3f}x at {row[0]:,}' for row in compared)} (target >= 0.95)")


def bench_eval(work: Path) -> None:
    cache = Path(tempfile.mkdtemp(prefix="embedlab-scale-eval-", dir=work))
    for shared in ("corpus", "reference"):  # machine-wide reference statistics, built once (not timed work)
        if (cache_root() / shared).is_dir():
            os.symlink(cache_root() / shared, cache / shared)
    seconds, rss = measured([sys.executable, "-m", "embedlab", "eval", "minilm", "--tasks", "sts", "--no-db", "--quiet"], cache)
    print(f"eval minilm --tasks sts (fresh cache): {seconds:.1f} s, peak RSS {rss:.2f} GB (target <= 2), "
          f"cache {folder_bytes(cache) / 2**20:.1f} MiB\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("embed", "eval", "all"), default="all")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes (texts)")
    parser.add_argument("--st-sizes", default=None, help="sizes at which sentence-transformers runs too (default: every size)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    st_sizes = set(sizes) if args.st_sizes is None else {int(size) for size in args.st_sizes.split(",")}
    print(f"cpu cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="embedlab-scale-") as folder:
        if args.part in ("eval", "all"):
            bench_eval(Path(folder))
        if args.part in ("embed", "all"):
            bench_embed(sizes, st_sizes, args.batch_size, Path(folder))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
