"""Semantic textual similarity: cosine of the two embeddings vs the gold score (pooling paper §3.5.2).

Spearman is the main metric; Pearson and Kendall τ-b / τ-c are reported too. For STS12–16 the "all"
score concatenates every subset of the year and computes one correlation (pooling paper follows [143]; it is
not SentEval's "mean"); SentEval's per-subset mean and size-weighted mean are separate records.
Pairwise methods score the pairs with ``method.similarity``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from embedlab.errors import InputError
from embedlab.data.containers import ScoredPairs
from embedlab.data.sts import sick_relatedness, sts_year, stsb
from embedlab.data.user_files import load_scored_pairs
from embedlab.evaluation.base import CORRELATION_METRICS, Method, Metric, Task
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import PairScorer


# why SentEval's per-subset averages have no interval: a mean of correlations over a handful of subsets
SUBSET_MEAN_NOTE = "a mean of per-subset correlations: no interval (the subset records and 'all' have one)"


def correlation_units(predicted: np.ndarray, gold: np.ndarray, metric: str) -> UnitScores:
    """The scored pairs behind one correlation record (what its bootstrap resamples)."""
    return UnitScores("pairs", metric, {"predicted": np.asarray(predicted, dtype=np.float64),
                                        "gold": np.asarray(gold, dtype=np.float64)})


def correlations(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Spearman, Pearson, Kendall τ-b and τ-c of ``predicted`` against ``gold``."""
    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if predicted.shape != gold.shape or predicted.ndim != 1:
        raise ValueError(f"predicted shape {predicted.shape} does not match gold shape {gold.shape}")
    if len(gold) < 2:
        raise InputError("correlations need at least two scored items")
    return {
        "spearman": float(stats.spearmanr(predicted, gold).statistic),
        "pearson": float(stats.pearsonr(predicted, gold).statistic),
        "kendall_b": float(stats.kendalltau(predicted, gold, variant="b").statistic),
        "kendall_c": float(stats.kendalltau(predicted, gold, variant="c").statistic),
    }


class STSTask(Task):
    """STS12–16 (per subset, "all", "mean", "wmean"), STS-B test, SICK-R test, or a user scored-pairs file."""

    name = "sts"
    description = "cosine of the two texts vs the gold similarity score (pooling paper §3.5.2)"
    datasets = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sick-r")
    user_files = True
    needs_vectors = False
    headline_metric = "spearman"
    metrics = CORRELATION_METRICS | {
        "spearman": Metric("Spearman rank correlation of cosine and gold score, −1–1 (subsets mean/wmean: "
                           "SentEval's per-subset mean and size-weighted mean)", unit="correlation"),
    }

    def __init__(self, dataset: str, *, path: str | None = None) -> None:
        super().__init__(dataset)
        self.path = path
        if path is None and dataset not in self.datasets:
            raise InputError(f"unknown STS dataset {dataset!r}; expected one of {', '.join(self.datasets)}")

    def load(self) -> list[ScoredPairs]:
        if self.path is not None:
            return [load_scored_pairs(self.path)]
        if self.dataset == "stsb":
            return [stsb("test")]
        if self.dataset == "sick-r":
            return [sick_relatedness("test")]
        return sts_year(self.dataset)

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        subsets = self.load()
        scorer = PairScorer(method, *[subset.pairs() for subset in subsets])
        scores = [scorer.similarity(subset.pairs()) for subset in subsets]
        records = []
        for subset, predicted in zip(subsets, scores):
            for metric, value in correlations(predicted, subset.scores).items():
                units = correlation_units(predicted, subset.scores, metric)
                records.append(self.record(method, subset.subset, metric, value, len(subset), units))
        if len(subsets) > 1:
            predicted, gold = np.concatenate(scores), np.concatenate([s.scores for s in subsets])
            total = sum(len(s) for s in subsets)
            for metric, value in correlations(predicted, gold).items():
                records.append(self.record(method, "all", metric, value, total, correlation_units(predicted, gold, metric)))
            per_subset = np.array([stats.spearmanr(p, s.scores).statistic for p, s in zip(scores, subsets)])
            sizes = np.array([len(s) for s in subsets], dtype=np.float64)
            records.append(self.record(method, "mean", "spearman", float(per_subset.mean()), total, note=SUBSET_MEAN_NOTE))
            records.append(self.record(method, "wmean", "spearman", float(np.average(per_subset, weights=sizes)), total,
                                       note=SUBSET_MEAN_NOTE))
        return records
