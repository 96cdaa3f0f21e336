"""Correlations of the embedding product with human scores (neural-embeddings paper §3.4, Table 4).

The product is the dot product of unit-normalised embeddings (of the embeddings as encoded with the
``product=dot`` option, Appendix F). Reported: Kendall τ-c, Kendall τ-b and
Spearman (plus Pearson). Datasets: STS-B test (product of the two sentences vs the similarity score) and
SummEval (product of article and system summary vs expert coherence, consistency, fluency, relevance;
1,600 summaries here, 100 articles × 16 systems). Pairwise methods score the pairs themselves.
"""

from __future__ import annotations

import numpy as np

from embedlab.errors import InputError
from embedlab.data.sts import stsb
from embedlab.data.summeval import SUMMEVAL_ASPECTS, summeval
from embedlab.data.user_files import load_scored_pairs
from embedlab.evaluation.base import CORRELATION_METRICS, Method, Task
from embedlab.evaluation.records import Record
from embedlab.evaluation.scoring import check_product, pair_scores, product_subset
from embedlab.evaluation.sts import correlation_units, correlations


class CorrelationsTask(Task):
    """STS-B test, SummEval (one subset per expert aspect) or a user scored-pairs file."""

    name = "correlations"
    description = "embedding product vs human scores (neural-embeddings paper §3.4)"
    datasets = ("stsb", "summeval")
    options = ("product",)
    user_files = True
    needs_vectors = False
    headline_metric = "spearman"
    metrics = CORRELATION_METRICS

    def __init__(self, dataset: str, *, path: str | None = None, product: str = "cosine") -> None:
        super().__init__(dataset)
        self.path = path
        self.product = check_product(product)
        if path is None and dataset not in self.datasets:
            raise InputError(f"unknown correlations dataset {dataset!r}; expected one of {', '.join(self.datasets)}")

    def check_data(self) -> None:
        if self.path is not None:
            load_scored_pairs(self.path)
        elif self.dataset == "summeval":
            summeval()
        else:
            stsb("test")

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        if self.dataset == "summeval" and self.path is None:
            items = summeval()
            products = pair_scores(method, [i.article for i in items], [i.summary for i in items], self.product)
            records = []
            for aspect in SUMMEVAL_ASPECTS:
                gold = np.array([i.scores[aspect] for i in items])
                for metric, value in correlations(products, gold).items():
                    records.append(self.record(method, product_subset(aspect, self.product), metric, value, len(items),
                                               correlation_units(products, gold, metric)))
            return records
        data = load_scored_pairs(self.path) if self.path is not None else stsb("test")
        products = pair_scores(method, data.first, data.second, self.product)
        subset = product_subset("similarity" if self.path is None else "score", self.product)
        return [self.record(method, subset, metric, value, len(data), correlation_units(products, data.scores, metric))
                for metric, value in correlations(products, data.scores).items()]
