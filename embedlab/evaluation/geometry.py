"""Isotropy and geometry of an embedding space (pooling paper §3.5.4–3.5.5).

* IsoScore (Rudman et al., 2022, the pooling paper's ref. [117]): reorient the points by PCA, take the variance of
  each principal direction, scale that vector to length √n, measure its distance δ to the all-ones vector
  (normalised to [0, 1]), turn it into the fraction of dimensions used, φ = (n − δ²(n − √n))² / n², and
  rescale: IsoScore = (n·φ − 1)/(n − 1), which is 0 when one direction holds all the variance and 1 for
  isotropic data. Computed on WikiText-2 sentences of at least 10 characters. The ``isoscore`` PyPI
  package (2.0.1) implements the same formula in torch; this numpy version avoids the dependency and is
  tested on closed-form cases.
* Alignment (Eq. 8), E‖f(x) − f(y)‖² over positive pairs (STS-B train pairs scored 5.0), and uniformity
  (Eq. 9), log E exp(−2‖f(x) − f(y)‖²) over all pairs of distinct sentences of the STS-B train pairs.
  The pooling paper computes both on the raw embeddings ("sensitive to the scaling"); the unit-normalised values of
  Wang & Isola are reported as ``alignment_unit`` / ``uniformity_unit``.

Both run on a user's own file too: ``isotropy:@FILE`` (texts, any format ``embed`` reads) and ``alignment:@FILE``
(text pairs with a 0/1 label or a 0–5 score; positives are label 1 or score ≥ 4, every pair without either), their
records in subset ``all`` (:mod:`embedlab.data.own_texts`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from embedlab.errors import InputError
from embedlab.data.own_texts import OwnPairs, read_own_pairs, read_own_texts
from embedlab.data.sts import stsb
from embedlab.data.wikitext import wikitext2_file, wikitext2_sentences
from embedlab.evaluation.base import Method, Metric, Task
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import Encoded, unit_rows
from embedlab.runtime.memo import memo


def isoscore(points: np.ndarray) -> float:
    """IsoScore of a point cloud of shape (samples, dimensions)."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[0] < 2 or points.shape[1] < 2:
        raise InputError(f"IsoScore needs at least 2 points in at least 2 dimensions, got shape {points.shape}")
    n = points.shape[1]
    # variances along the principal directions = eigenvalues of the covariance matrix
    variances = np.clip(np.linalg.eigvalsh(np.cov(points, rowvar=False)), 0.0, None)
    norm = np.linalg.norm(variances)
    if norm == 0:
        raise InputError("IsoScore is undefined for a point cloud with zero variance")
    scaled = variances * np.sqrt(n) / norm
    defect = np.linalg.norm(scaled - 1.0) / np.sqrt(2 * (n - np.sqrt(n)))
    used_fraction = (n - defect ** 2 * (n - np.sqrt(n))) ** 2 / n ** 2
    return float((n * used_fraction - 1) / (n - 1))


def squared_distances(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Each positive pair's squared distance (Eq. 8's terms; the alignment records' units)."""
    difference = np.asarray(first, dtype=np.float64) - np.asarray(second, dtype=np.float64)
    return np.sum(difference ** 2, axis=1)


def alignment(first: np.ndarray, second: np.ndarray) -> float:
    """Eq. 8: mean squared distance between the embeddings of positive pairs."""
    return float(np.mean(squared_distances(first, second)))


# why the whole-set statistics have no interval
_ISOSCORE_NOTE = "a property of the whole set's covariance, not a mean over units: no interval"
_UNIFORMITY_NOTE = "a log-mean over all sentence pairs (not independent units): no interval"


def uniformity(points: np.ndarray, t: float = 2.0, block: int = 1024) -> float:
    """Eq. 9: log of the mean of exp(−t‖x − y‖²) over all pairs of distinct points (computed stably)."""
    points = np.asarray(points, dtype=np.float64)
    count = points.shape[0]
    if count < 2:
        raise InputError("uniformity needs at least two points")
    squared = np.sum(points ** 2, axis=1)
    partial = []
    for start in range(0, count - 1, block):
        stop = min(start + block, count)
        # pairs i < j only: this block's rows against the columns from its own first row on (the columns before
        # it were paired with these rows by earlier blocks), so half the products and exponentials are never made
        exponents = points[start:stop] @ points[start:].T  # then -t‖x − y‖², in place: no temporary arrays
        exponents *= -2.0
        exponents += squared[start:stop, None]
        exponents += squared[None, start:]
        np.maximum(exponents, 0.0, out=exponents)
        exponents *= -t
        size = stop - start
        if size > 1:  # inside the block's square: above its diagonal
            partial.append(logsumexp(exponents[np.triu_indices(size, k=1)]))
        if stop < count:  # the columns after the block: every pair
            partial.append(logsumexp(exponents[:, size:]))
    pairs = count * (count - 1) / 2
    return float(logsumexp(partial) - np.log(pairs))


class IsotropyTask(Task):
    """IsoScore of the method's embeddings of WikiText-2 sentences (≥ 10 characters)."""

    name = "isotropy"
    description = "IsoScore of the embeddings of WikiText-2 sentences (pooling paper §3.5.4)"
    datasets = ("wikitext2",)
    user_files = True  # isotropy:@FILE, the user's own texts (each text as it is, repeats once)
    headline_metric = "isoscore"  # what comparisons rank on, on WikiText-2 and on a user's file alike
    metrics = {"isoscore": Metric("IsoScore, 0 (one direction holds all variance) – 1 (isotropic)", unit="score")}

    def __init__(self, dataset: str = "wikitext2", *, split: str = "test", path: str | None = None) -> None:
        super().__init__(dataset)
        self.split, self.path = split, path

    def check_data(self) -> None:
        if self.path is not None:
            self.own_texts()  # empty, binary or too few texts: refused before encoding
        else:
            wikitext2_file(self.split)  # present (sentences are split, and cached, when the task runs)

    def own_texts(self) -> list[str]:
        """The user file's texts, read once per process (the dataset name holds the file's digest)."""
        return memo("geometry.own_texts", maxsize=4).get(self.dataset,
                                                          lambda: read_own_texts(self.path, split=False).sentences)

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        sentences = self.own_texts() if self.path else wikitext2_sentences(self.split)
        encoded = Encoded(method, sentences)
        return [self.record(method, "all" if self.path else self.split, "isoscore", isoscore(encoded.vectors),
                            len(encoded.texts), note=_ISOSCORE_NOTE)]


class AlignmentTask(Task):
    """Alignment (STS-B train pairs scored 5.0) and uniformity (all sentences of STS-B train pairs)."""

    name = "alignment"
    description = "alignment (Eq. 8) of STS-B train pairs scored 5.0 and uniformity (Eq. 9) of their sentences (pooling paper §3.5.5)"
    datasets = ("stsb",)
    user_files = True  # alignment:@FILE, a user's pairs file
    headline_metric = "alignment"  # what comparisons rank on (lower is better)
    metrics = {
        "alignment": Metric("mean squared distance of positive pairs' raw embeddings (Eq. 8)", "lower", unit="distance"),
        "uniformity": Metric("log mean exp(−2·squared distance) over all sentence pairs, raw embeddings (Eq. 9)", "lower", unit="score"),
        "alignment_unit": Metric("Eq. 8 on unit-normalised embeddings, 0–4", "lower", unit="distance"),
        "uniformity_unit": Metric("Eq. 9 on unit-normalised embeddings, −4–0", "lower", unit="score"),
    }

    def __init__(self, dataset: str = "stsb", *, path: str | None = None) -> None:
        super().__init__(dataset)
        self.path = path

    def check_data(self) -> None:
        self.load()

    def load(self) -> OwnPairs:
        """The pairs and which are positive: STS-B train's pairs scored 5.0, or a user file's positives."""
        if self.path is not None:  # read once per process (the dataset name holds the file's digest)
            return memo("geometry.own_pairs", maxsize=4).get(self.dataset, lambda: read_own_pairs(self.path))
        data = stsb("train")
        return OwnPairs(data.name, data.first, data.second, data.scores == 5.0, list(range(1, len(data) + 1)))

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        data = self.load()
        encoded = Encoded(method, data.first, data.second)
        vectors, texts = encoded.vectors, encoded.texts
        positive = np.flatnonzero(data.positive)
        first = encoded.rows([data.first[i] for i in positive])
        second = encoded.rows([data.second[i] for i in positive])
        subset = "all" if self.path else "train"
        unit = unit_rows(vectors)
        raw, normalised = squared_distances(first, second), squared_distances(unit_rows(first), unit_rows(second))
        return [
            self.record(method, subset, "alignment", float(np.mean(raw)), positive.size,
                        UnitScores("pairs", "mean", {"score": raw})),
            self.record(method, subset, "uniformity", uniformity(vectors), len(texts), note=_UNIFORMITY_NOTE),
            self.record(method, subset, "alignment_unit", float(np.mean(normalised)), positive.size,
                        UnitScores("pairs", "mean", {"score": normalised})),
            self.record(method, subset, "uniformity_unit", uniformity(unit), len(texts), note=_UNIFORMITY_NOTE),
        ]
