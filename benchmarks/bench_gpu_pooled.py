"""embedlab's pooled encode on a GPU beside sentence-transformers on the same GPU, in fp32 and bf16.

The work: ``--texts`` distinct WikiText-2 texts (100,000 by default: every sentence of the three splits,
86,152, then train sentences joined with their successor; see :func:`write_sentences`), all-MiniLM-L6-v2, mean
pooling, batch size ``--batch-size``. Five settings, each run once per repeat in an order that rotates every
repeat, in one process:

* embedlab ``minilm`` (fp32) and ``minilm:dtype=bf16``, token states not stored (a corpus is read once);
* sentence-transformers fp32 and bf16 (``model_kwargs={"dtype": torch.bfloat16}``);
* embedlab ``minilm`` with TF32 matmuls (``torch.set_float32_matmul_precision("high")`` around the call).

TF32 is off elsewhere (PyTorch's default), so the fp32 rows are true float32. Printed per setting: the median
seconds, texts/s, the ratio to sentence-transformers fp32, and the min/mean cosine to sentence-transformers fp32 (embedlab fp32 against it shows that both compute the same vectors).

    python benchmarks/bench_gpu_pooled.py --sentences FILE [--texts 100000] [--repeats 3] [--json OUT]

``--sentences FILE`` reads one sentence per line (a GPU machine without the shared data gets a file written
here by ``--write-sentences FILE``, which needs the shared data and no GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

import embedlab
from embedlab.models.loading import resolve_model_path
from embedlab.runtime.settings import token_states_uncached


def write_sentences(path: str, count: int) -> None:
    """WikiText-2 has 86,152 sentences of ≥ 10 characters (train 70,016, valid 7,427, test 8,709): all of them,
    then, up to ``count``, train sentences joined with their successor, so that every text is distinct."""
    from embedlab.data.wikitext import wikitext2_sentences

    train = wikitext2_sentences("train")
    sentences = list(dict.fromkeys(train + wikitext2_sentences("valid") + wikitext2_sentences("test")))
    sentences += [f"{a} {b}" for a, b in zip(train[::2], train[1::2])][: max(0, count - len(sentences))]
    sentences = sentences[:count]
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(sentence.replace("\n", " ") + "\n" for sentence in sentences)
    print(f"wrote {len(sentences)} sentences to {path}")


def synchronised(run, device: str):
    def wait() -> None:
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    def timed(texts: list[str], batch_size: int) -> tuple[float, np.ndarray]:
        wait()
        start = time.perf_counter()
        vectors = run(texts, batch_size)
        wait()
        return time.perf_counter() - start, vectors
    return timed


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors = vectors.astype(np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def settings(device: str) -> dict:
    folder = str(resolve_model_path("minilm"))
    st32 = SentenceTransformer(folder, device=device)
    st16 = SentenceTransformer(folder, device=device, model_kwargs={"dtype": torch.bfloat16})

    def embedlab_run(spec: str):
        def run(texts: list[str], batch_size: int) -> np.ndarray:
            with token_states_uncached():
                return embedlab.load(spec).encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                                  show_progress_bar=False)
        return run

    def st_run(model: SentenceTransformer):
        return lambda texts, batch_size: model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                                      show_progress_bar=False)

    def with_tf32(run):
        def tf32_run(texts: list[str], batch_size: int) -> np.ndarray:
            previous = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("high")  # float32 matmuls with TF32 inputs (Ampere and later)
            try:
                return run(texts, batch_size)
            finally:
                torch.set_float32_matmul_precision(previous)
        return tf32_run

    return {"sentence-transformers fp32": st_run(st32), "sentence-transformers bf16": st_run(st16),
            "embedlab minilm": embedlab_run("minilm"), "embedlab minilm:dtype=bf16": embedlab_run("minilm:dtype=bf16"),
            "embedlab minilm, TF32 matmuls": with_tf32(embedlab_run("minilm"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", help="one sentence per line")
    parser.add_argument("--write-sentences", help="write the first --texts WikiText-2 sentences here and stop")
    parser.add_argument("--texts", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.write_sentences:
        write_sentences(args.write_sentences, args.texts)
        return
    with open(args.sentences, encoding="utf-8") as lines:
        texts = [line.rstrip("\n") for line in lines][: args.texts]
    device_name = torch.cuda.get_device_name(0) if torch.device(args.device).type == "cuda" else args.device
    print(f"device {device_name}, torch {torch.__version__}, {len(texts)} sentences, "
          f"batch {args.batch_size}, TF32 matmul {torch.backends.cuda.matmul.allow_tf32}")
    runs = {name: synchronised(run, args.device) for name, run in settings(args.device).items()}
    for name, run in runs.items():  # warm-up: kernels, allocator, model load
        run(texts[:2048], args.batch_size)
    times: dict[str, list[float]] = {name: [] for name in runs}
    vectors: dict[str, np.ndarray] = {}
    names = list(runs)
    for repeat in range(args.repeats):
        for name in names[repeat % len(names):] + names[: repeat % len(names)]:
            seconds, vectors[name] = runs[name](texts, args.batch_size)
            times[name].append(seconds)
            print(f"  repeat {repeat}: {name}: {seconds:.2f} s", flush=True)
    reference = vectors["sentence-transformers fp32"]
    baseline = statistics.median(times["sentence-transformers fp32"])
    rows = []
    for name in names:
        median = statistics.median(times[name])
        cosine = np.sum(unit(vectors[name]) * unit(reference), axis=1)
        below = int(np.sum(cosine < 0.9999))
        rows.append({"setting": name, "median_s": median, "texts_per_s": len(texts) / median,
                     "ratio_to_st_fp32": baseline / median, "min_cosine": float(cosine.min()),
                     "mean_cosine": float(cosine.mean()), "below_0.9999": below, "times": times[name]})
        print(f"{name:32s} {median:7.2f} s {len(texts) / median:9.0f} texts/s  {baseline / median:5.2f}x ST fp32  "
              f"cosine to ST fp32 min {cosine.min():.6f} mean {cosine.mean():.6f} ({below} texts below 0.9999)")
    tokenizer = SentenceTransformer(str(resolve_model_path("minilm")), device="cpu").tokenizer
    lengths = np.array([len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]])
    print(f"texts longer than sentence-transformers' max_seq_length 256 (it truncates them; embedlab encodes "
          f"long texts in sentence-packed chunks): {int(np.sum(lengths > 256))} of {len(texts)}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": device_name, "torch": torch.__version__, "texts": len(texts),
                       "batch_size": args.batch_size, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
