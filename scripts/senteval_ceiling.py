"""How high can a linear classifier get on a SentEval set with frozen ``st:minilm`` vectors?

Evidence for docs/evaluation.md (the SentEval ceiling): plain 10-fold logistic regression over a wide range
of regularisation strengths, on the raw (unit-norm) vectors and on standardised features. If none of
them comes near ALIGN-SIM Table 2, the gap is not a matter of classifier settings.

    python scripts/senteval_ceiling.py mr [--spec st:minilm]
"""

from __future__ import annotations

import argparse
import os
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import embedlab
from embedlab.data.senteval import senteval_binary

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ALIGN_SIM_TABLE_2 = {"mr": 83.95, "cr": 88.98, "subj": 93.77, "mpqa": 89.51}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=sorted(ALIGN_SIM_TABLE_2))
    parser.add_argument("--spec", default="st:minilm")
    args = parser.parse_args()
    data = senteval_binary(args.dataset)
    vectors = embedlab.load(args.spec).encode(data.texts, batch_size=64)
    folds = StratifiedKFold(n_splits=10, shuffle=True, random_state=0)
    print(f"{args.dataset}: {len(data)} texts, {args.spec}; ALIGN-SIM Table 2: {ALIGN_SIM_TABLE_2[args.dataset]}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for c in (1, 8, 64, 1024):
            score = cross_val_score(LogisticRegression(C=c, max_iter=2000), vectors, data.labels, cv=folds).mean()
            print(f"raw vectors, C={c}: {100 * score:.2f}")
        for c in (0.01, 0.1, 1):
            model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
            print(f"standardised, C={c}: {100 * cross_val_score(model, vectors, data.labels, cv=folds).mean():.2f}")


if __name__ == "__main__":
    main()
