"""How ties decide the STS triplet count (neural paper Table 1: all-MiniLM-L6-v2 breaks 945 of 455,624).

Eq. 2 asks for E_A·E_B > E_A·E_C, so a tie breaks the triplet and embedlab counts it (``≤``). STS-B test
repeats some sentences, and identical texts get identical vectors when each distinct text is encoded
once, so their products tie exactly. This prints the count under both rules, the number of exact ties
and duplicate sentences, and the counts when every occurrence is encoded on its own in
sentence-transformers' batches (as a script that does not deduplicate would):

    python scripts/triplet_ties.py [--spec st:minilm]
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np

import embedlab
from embedlab.evaluation.triplets import triplets_sts


def counts(vectors: np.ndarray, groups: np.ndarray) -> dict[str, int]:
    """Broken triplets with ``≤`` and with ``<``, and exact ties, over all (A, B, C) of the grouping."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    products = unit.astype(np.float64) @ unit.astype(np.float64).T
    at_most = strictly = ties = 0
    for anchor in range(len(groups)):
        own = groups == groups[anchor]
        positives = np.flatnonzero(own & (np.arange(len(groups)) != anchor))
        negatives = np.sort(products[anchor, ~own])
        if positives.size == 0:
            continue
        values = products[anchor, positives]
        greater_equal = negatives.size - np.searchsorted(negatives, values, side="left")
        greater = negatives.size - np.searchsorted(negatives, values, side="right")
        at_most += int(greater_equal.sum())
        strictly += int(greater.sum())
        ties += int((greater_equal - greater).sum())
    return {"wrong (ties count, <=)": at_most, "wrong (ties do not count, <)": strictly, "exact ties": ties}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="st:minilm")
    args = parser.parse_args()
    data = triplets_sts()
    repeated = {text: count for text, count in collections.Counter(data.texts).items() if count > 1}
    method = embedlab.load(args.spec)
    distinct = list(dict.fromkeys(data.texts))
    distinct_vectors = method.encode(distinct, batch_size=32, show_progress_bar=False)
    index = {text: row for row, text in enumerate(distinct)}
    once = counts(distinct_vectors[[index[text] for text in data.texts]], data.groups)
    separately = counts(method.encode(data.texts, batch_size=32, show_progress_bar=False), data.groups)
    print(json.dumps({"spec": args.spec, "texts": len(data.texts), "distinct texts": len(distinct),
                      "sentences occurring more than once": len(repeated), "extra occurrences": sum(repeated.values()) - len(repeated),
                      "each distinct text encoded once": once, "every occurrence encoded on its own": separately}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
