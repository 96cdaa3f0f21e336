"""The BERTScore parity table of docs/matching.md: embedlab against the bert-score package, per layer.

    HF_HUB_OFFLINE=1 python scripts/bertscore_parity.py [--pairs 300]

The first N STS-B test pairs (sentence 1 = candidate, sentence 2 = reference), all-MiniLM-L6-v2, every
layer, idf off and on the references: the largest absolute difference in P, R and F1 between
``embedlab.bertscore`` and ``bert_score.score`` (one all-layer package run per idf setting), then the
F1 of ``match:minilm,mode=bertscore,weights=none|idf-refs`` at the last layer, and what the package's
padded-batch floor changes (``package_padding=False``). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

import embedlab
from embedlab.data.sts import stsb
from embedlab.models.loading import load_model, resolve_model_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=300)
    args = parser.parse_args()
    from bert_score import score as package_score

    test = stsb("test")
    cands, refs = list(test.first[: args.pairs]), list(test.second[: args.pairs])
    model = load_model("minilm")
    path = str(resolve_model_path("minilm"))
    print(f"first {len(cands)} STS-B test pairs, minilm; largest |embedlab - package| over the pairs\n")
    print("| setting | P | R | F1 |\n|---|---|---|---|")
    package = {}
    for idf in (False, True):
        scores = package_score(cands, refs, model_type=path, num_layers=model.num_layers, idf=idf, all_layers=True, nthreads=0)
        package[idf] = np.stack([part.numpy() for part in scores])  # (3, layers, pairs)
        for layer in range(model.num_layers + 1):
            ours = embedlab.bertscore(cands, refs, model=model, layer=layer, idf=idf)
            cells = " | ".join(f"{np.abs(mine - package[idf][index, layer]).max():.1e}" for index, mine in enumerate(ours))
            print(f"| `embedlab.bertscore`, layer {layer}, idf {'on the references' if idf else 'off'} | {cells} |", flush=True)
    last = model.num_layers
    for weights, idf in (("none", False), ("idf-refs", True)):
        f1 = embedlab.load(f"match:minilm,mode=bertscore,weights={weights}").similarity_pairs(list(zip(cands, refs)))
        print(f"| `match:minilm,mode=bertscore,weights={weights}` (layer {last}) | | | {np.abs(f1 - package[idf][2, last]).max():.1e} |")
    plain = embedlab.bertscore(cands, refs, model=model, idf=False, package_padding=False)
    differs = np.abs(plain[2] - package[False][2, last])
    print(f"| layer {last}, idf off, `package_padding=False` | | | {differs.max():.1e} ({int((differs > 1e-4).sum())} pairs above 1e-4) |")


if __name__ == "__main__":
    main()
