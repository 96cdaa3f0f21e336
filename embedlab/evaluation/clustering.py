"""Short-text clustering (pooling paper §3.5.1): k-means with k = number of classes on the raw embeddings,
10 runs with different seeds, accuracy under the best one-to-one matching of clusters to classes
(Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``); mean and standard deviation.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans

from embedlab.errors import InputError
from embedlab.data.clustering import CLUSTERING_CLASSES, clustering_set
from embedlab.data.containers import LabelledTexts
from embedlab.data.user_files import load_labelled_texts
from embedlab.evaluation.base import Method, Metric, Task, solver_threads
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import embed


def matched_accuracy(labels: np.ndarray, clusters: np.ndarray) -> float:
    """Fraction of items whose cluster maps to their class under the best one-to-one mapping."""
    labels, clusters = np.asarray(labels), np.asarray(clusters)
    if labels.shape != clusters.shape:
        raise ValueError(f"{labels.shape[0]} labels but {clusters.shape[0]} cluster assignments")
    _, label_index = np.unique(labels, return_inverse=True)
    _, cluster_index = np.unique(clusters, return_inverse=True)
    size = max(label_index.max(), cluster_index.max()) + 1
    contingency = np.zeros((size, size), dtype=np.int64)
    np.add.at(contingency, (cluster_index, label_index), 1)
    rows, columns = linear_sum_assignment(contingency, maximize=True)
    return float(contingency[rows, columns].sum() / labels.size)


def kmeans_accuracies(vectors: np.ndarray, labels: np.ndarray, runs: int = 10, seed: int = 0) -> np.ndarray:
    """Matched accuracy of ``runs`` k-means fits (seeds ``seed`` … ``seed + runs - 1``)."""
    k = int(np.unique(labels).size)
    vectors = np.asarray(vectors, dtype=np.float64)
    scores = []
    with solver_threads():
        for run in range(runs):
            assignment = KMeans(n_clusters=k, n_init=1, random_state=seed + run).fit_predict(vectors)
            scores.append(matched_accuracy(labels, assignment))
    return np.array(scores)


class ClusteringTask(Task):
    """agnews, biomedical, googlenews_ts, searchsnippets, stackoverflow, tweet (also googlenews_s/_t), or a
    user labelled-texts file."""

    name = "clustering"
    description = "k-means (k = classes) on raw embeddings, 10 seeds, Hungarian-matched accuracy (pooling paper §3.5.1)"
    datasets = ("agnews", "biomedical", "googlenews_ts", "searchsnippets", "stackoverflow", "tweet")
    options = ("seed",)
    user_files = True
    headline_metric = "accuracy"
    metrics = {
        "accuracy": Metric("mean matched accuracy over the k-means runs, 0–1", unit="fraction"),
        "accuracy_std": Metric("standard deviation of the matched accuracy over the runs, 0–1", "lower", unit="fraction"),
    }

    def __init__(self, dataset: str, *, path: str | None = None, runs: int = 10, seed: int = 0) -> None:
        super().__init__(dataset)
        self.path, self.runs, self.seed = path, runs, seed
        if path is None and dataset not in CLUSTERING_CLASSES:
            raise InputError(f"unknown clustering dataset {dataset!r}; expected one of {', '.join(CLUSTERING_CLASSES)}")

    def load(self) -> LabelledTexts:
        return load_labelled_texts(self.path) if self.path else clustering_set(self.dataset)

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        data = self.load()
        (vectors,) = embed(method, data.texts)
        scores = kmeans_accuracies(vectors, data.labels, self.runs, self.seed)
        # The units are the k-means seeds: the interval says how much the mean moves with the runs' random
        # starts (the texts are fixed, every run clusters all of them, so there is no text sample to resample).
        return [
            self.record(method, "all", "accuracy", float(scores.mean()), len(data), UnitScores("seeds", "mean", {"score": scores})),
            self.record(method, "all", "accuracy_std", float(scores.std()), len(data),
                        note="the spread over the k-means seeds itself: no interval"),
        ]
