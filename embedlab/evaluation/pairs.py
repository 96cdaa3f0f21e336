"""Agreement with similar / non-similar pairs (neural-embeddings paper §3.3, Eq. 4).

Every (similar pair, non-similar pair) tuple should have the similar pair's product higher; a tuple with
``product(similar) <= product(non-similar)`` is wrong. The product is the dot product of unit-normalised
embeddings, or of the embeddings as encoded with the ``product=dot`` option (neural-embeddings paper Appendix F). Counting is exact without enumerating tuples: sort the non-similar
products once and binary-search each similar product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embedlab.errors import InputError
from embedlab.data.containers import LabelledPairs
from embedlab.data.paraphrase import mrpc_glue_train, paws_wiki, qqp
from embedlab.data.sts import stsb
from embedlab.data.user_files import load_scored_pairs
from embedlab.evaluation.base import COUNT_NOTE, ERROR_COUNT_METRICS, Method, Task
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import check_product, pair_scores, product_subset


# -- the shared similar / non-similar pair sets (neural-embeddings paper §3.3) -----------------------


@dataclass(frozen=True)
class SimilarPairs:
    """Pairs labelled similar and pairs labelled non-similar (neural-embeddings paper §3.3)."""

    name: str
    similar: list[tuple[str, str]]
    different: list[tuple[str, str]]


def pairs_mrpc() -> SimilarPairs:
    """MRPC GLUE train: 2,474 paraphrase pairs vs 1,194 non-paraphrase pairs."""
    data = mrpc_glue_train()
    pairs = data.pairs()
    return SimilarPairs("mrpc", [p for p, l in zip(pairs, data.labels) if l == 1],
                        [p for p, l in zip(pairs, data.labels) if l == 0])


def pairs_sts() -> SimilarPairs:
    """STS-B test: score ≥ 4 (338 pairs) vs score ≤ 2 (534 pairs)."""
    data = stsb("test")
    pairs = data.pairs()
    return SimilarPairs("sts", [p for p, s in zip(pairs, data.scores) if s >= 4.0],
                        [p for p, s in zip(pairs, data.scores) if s <= 2.0])


def _labelled_similar_pairs(data: LabelledPairs) -> SimilarPairs:
    pairs = data.pairs()
    return SimilarPairs(data.name, [p for p, l in zip(pairs, data.labels) if l == 1],
                        [p for p, l in zip(pairs, data.labels) if l == 0])


PAIR_SETS = {
    "mrpc": pairs_mrpc, "sts": pairs_sts,
    "paws": lambda: _labelled_similar_pairs(paws_wiki("test")),
    "qqp": lambda: _labelled_similar_pairs(qqp()),
}


@dataclass(frozen=True)
class PairCounts:
    total: int
    wrong: int
    same: float  # mean product of the similar pairs
    diff: float  # mean product of the non-similar pairs

    @property
    def error(self) -> float:
        return self.wrong / self.total if self.total else float("nan")


def count_wrong_tuples(similar: np.ndarray, different: np.ndarray) -> PairCounts:
    """Tuples (s, d) with ``similar[s] <= different[d]``, counted with one sort and a binary search."""
    similar, different = np.asarray(similar, dtype=np.float64), np.asarray(different, dtype=np.float64)
    if similar.size == 0 or different.size == 0:
        raise InputError(f"pairs need both similar ({similar.size}) and non-similar ({different.size}) pairs")
    ordered = np.sort(different)
    # different values >= s  =  all minus those strictly below s
    at_least = ordered.size - np.searchsorted(ordered, similar, side="left")
    return PairCounts(total=similar.size * different.size, wrong=int(at_least.sum()),
                      same=float(similar.mean()), diff=float(different.mean()))


class PairsTask(Task):
    """mrpc (GLUE train), sts (STS-B test ≥ 4 vs ≤ 2), paws (test), qqp (sample), or a user file of
    labelled pairs (``label`` 1 = similar, 0 = non-similar)."""

    name = "pairs"
    description = "every (similar, non-similar) pair tuple should rank the similar pair higher (neural-embeddings paper §3.3, Eq. 4)"
    datasets = ("mrpc", "sts")
    options = ("product",)
    user_files = True
    needs_vectors = False
    headline_metric = "error"
    metrics = ERROR_COUNT_METRICS

    def __init__(self, dataset: str, *, path: str | None = None, product: str = "cosine") -> None:
        super().__init__(dataset)
        self.path = path
        self.product = check_product(product)
        if path is None and dataset not in PAIR_SETS:
            raise InputError(f"unknown pairs dataset {dataset!r}; expected one of {', '.join(PAIR_SETS)}")

    def load(self) -> SimilarPairs:
        if self.path is None:
            return PAIR_SETS[self.dataset]()
        scored = load_scored_pairs(self.path)
        labels = set(np.unique(scored.scores).tolist())
        if not labels <= {0.0, 1.0}:
            raise InputError(f"{self.path}: pairs need labels 0 (non-similar) and 1 (similar), found {sorted(labels)[:5]}")
        pairs = scored.pairs()
        return SimilarPairs(self.dataset, [p for p, s in zip(pairs, scored.scores) if s == 1.0],
                            [p for p, s in zip(pairs, scored.scores) if s == 0.0])

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        data = self.load()
        all_pairs = data.similar + data.different
        products = pair_scores(method, [a for a, _ in all_pairs], [b for _, b in all_pairs], self.product)
        similar, different = products[: len(data.similar)], products[len(data.similar):]
        counts = count_wrong_tuples(similar, different)
        subset = product_subset("all", self.product)
        # the units are the labelled pairs: the error resamples all of them, the two means their own kind
        labels = np.r_[np.ones(similar.size), np.zeros(different.size)]
        return [
            self.record(method, subset, "error", counts.error, counts.total,
                        UnitScores("pairs", "tuple_error", {"predicted": products, "similar": labels})),
            self.record(method, subset, "total", counts.total, counts.total, note=COUNT_NOTE),
            self.record(method, subset, "wrong", counts.wrong, counts.total, note=COUNT_NOTE),
            self.record(method, subset, "same", counts.same, len(data.similar), UnitScores("pairs", "mean", {"score": similar})),
            self.record(method, subset, "diff", counts.diff, len(data.different), UnitScores("pairs", "mean", {"score": different})),
        ]
