"""Write (or check) the reference statistics shipped for a model's tokenizer (embedlab/resources/wikitext2-train-reference-*.npz).

    HF_HUB_OFFLINE=1 python scripts/reference_statistics.py --model minilm            # count and write (≈ 6 CPU s)
    HF_HUB_OFFLINE=1 python scripts/reference_statistics.py --model minilm --check    # count again, compare bit for bit

idf^W and token counts over WikiText-2 train's sentences (min_chars=1, ``<unk>`` written as the tokenizer's
unknown token), counted by ``token_statistics`` exactly as ``reference_token_statistics`` counts them on a
machine without the file; stored with the SHA-256 of the tokenizer's definition and of the train file.
"""

from __future__ import annotations

import argparse

import numpy as np

from embedlab.data.wikitext import wikitext2_sentences, wikitext2_sha256
from embedlab.models.loading import load_model
from embedlab.pooling.shipped_statistics import shipped_statistics, statistics_file, tokenizer_sha256, write_shipped_statistics
from embedlab.pooling.weights import token_statistics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--check", action="store_true", help="compare the shipped file with a fresh count instead of writing")
    args = parser.parse_args()
    tokenizer = load_model(args.model).tokenizer
    sentences = wikitext2_sentences("train", min_chars=1, unk_token=tokenizer.unk_token or "<unk>")
    idf, counts = token_statistics(tokenizer, sentences)
    path = statistics_file(tokenizer_sha256(tokenizer))
    if args.check:
        shipped = shipped_statistics(tokenizer, wikitext2_sha256("train"))
        if shipped is None:
            raise SystemExit(f"{path}: no shipped statistics for this tokenizer and train file")
        same = np.array_equal(shipped[0], idf) and np.array_equal(shipped[1], counts)
        print(f"{path}: {len(sentences)} sentences, {int(counts.sum())} tokens: {'identical' if same else 'DIFFERENT'}")
        if not same:
            raise SystemExit("the shipped statistics differ from a fresh count")
        return
    write_shipped_statistics(path, tokenizer, wikitext2_sha256("train"), idf, counts)
    print(f"wrote {path} ({path.stat().st_size} bytes): {len(sentences)} sentences, {int(counts.sum())} tokens")


if __name__ == "__main__":
    main()
