"""Build the BERTScore rescaling baselines of a model, every layer, from random WikiText-2 sentence pairs.

    HF_HUB_OFFLINE=1 python scripts/bertscore_baselines.py --model minilm --out embedlab/resources/bertscore_baselines/minilm.json

writes one record (its provenance and P, R, F per layer) that ``embedlab.bertscore(..., rescale=True)``
reads for that model before looking in the cache.
"""

from __future__ import annotations

import argparse

from embedlab.matching.bertscore_baselines import BASELINE_PAIRS, BASELINE_SEED, build_baselines, write_baseline_record
from embedlab.models.loading import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--out", required=True)
    parser.add_argument("--pairs", type=int, default=BASELINE_PAIRS)
    parser.add_argument("--seed", type=int, default=BASELINE_SEED)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    model = load_model(args.model)
    baselines = build_baselines(model, range(model.num_layers + 1), args.batch_size, True, args.pairs, args.seed)
    write_baseline_record(args.out, baselines)
    for layer, baseline in baselines.items():
        print(f"layer {layer}: P {baseline.values[0]:.6f} R {baseline.values[1]:.6f} F {baseline.values[2]:.6f}")
    print(f"wrote {args.out} ({baselines[model.num_layers].provenance['seconds']} s)")


if __name__ == "__main__":
    main()
