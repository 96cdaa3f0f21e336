"""SentEval-style classification on frozen embeddings (pooling paper §3.5.3; ALIGN-SIM §3 and Appendix A.3).

Logistic regression (scikit-learn) on the raw embeddings, with SentEval's three validation schemes:

* MR, CR, SUBJ, MPQA (one labelled set): 10-fold stratified cross-validation; in each outer fold the
  inverse regularisation C ∈ {2⁻², …, 2³} is chosen by an inner 10-fold cross-validation on the
  training part, then the model is refit on it and scored on the held-out fold; accuracy is the mean.
* TREC and MRPC (train and test sets): C ∈ {2⁻¹, …, 2⁵} chosen by 10-fold cross-validation on train,
  refit on all of train, scored on test.
* SST-2, SST-5 and SICK-E (train, dev, test): C ∈ {2⁻², …, 2³} chosen on dev, scored on test.

Pair tasks (MRPC, SICK-E) use SentEval's pair features [|u−v|, u∘v] by default; ``pair_features="full"``
gives the InferSent-style [u, v, |u−v|, u∘v]. All texts of a dataset (every split, both sides of every
pair) are encoded in one call; an empty sentence of SentEval's sets (CR has 4, MPQA 3) is encoded as '.', as
SentEval's reference batchers pass it on. The helpers below work in SentEval's rounded percentages (model selection
compares them); the records hold accuracies as fractions 0–1, like every other share in the harness.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from embedlab.errors import InputError
from embedlab.data import DataFormatError
from embedlab.data.containers import LabelledPairs, LabelledTexts
from embedlab.data.paraphrase import mrpc
from embedlab.data.senteval import batcher_texts, senteval_binary, sst, trec
from embedlab.data.sts import sick_entailment
from embedlab.data.user_files import load_labelled_texts
from embedlab.evaluation.base import Method, Metric, Task, solver_threads
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import embed

INNER_REGS = [2.0 ** t for t in range(-2, 4)]  # SentEval InnerKFoldClassifier / SplitClassifier
KFOLD_REGS = [2.0 ** t for t in range(-1, 6)]  # SentEval KFoldClassifier
CV_SETS = ("mr", "cr", "subj", "mpqa")
KFOLD_SETS = ("trec", "mrpc")
SPLIT_SETS = ("sst2", "sst5", "sick-e")


def _fit(features: np.ndarray, labels: np.ndarray, c: float, seed: int) -> LogisticRegression:
    model = LogisticRegression(C=c, random_state=seed, max_iter=1000)
    with warnings.catch_warnings(), solver_threads():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the bounded max_iter keeps results deterministic
        return model.fit(features, labels)


def _cv_choose(features: np.ndarray, labels: np.ndarray, regs: list[float], folds: int, seed: int) -> tuple[float, float]:
    """(best C, its mean cross-validated accuracy); ties go to the first (smallest) C, as SentEval's argmax."""
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    splits = list(splitter.split(features, labels))
    means = []
    for c in regs:
        scores = [_fit(features[train], labels[train], c, seed).score(features[test], labels[test]) for train, test in splits]
        means.append(round(100 * float(np.mean(scores)), 2))  # SentEval compares rounded percentages
    best = int(np.argmax(means))
    return regs[best], means[best]


def _tested(model: LogisticRegression, test_x: np.ndarray, test_y: np.ndarray) -> tuple[float, np.ndarray]:
    """(test accuracy in %, each test item's correctness as 1/0: the bootstrap's units)."""
    correct = (model.predict(test_x) == test_y).astype(np.float64)
    return 100 * float(correct.mean()), correct


def nested_cv_accuracy(features: np.ndarray, labels: np.ndarray, *, folds: int = 10, inner_folds: int = 10,
                       seed: int = 0) -> tuple[float, float, np.ndarray]:
    """SentEval InnerKFoldClassifier: (mean inner-CV accuracy of the chosen C, mean outer test accuracy in %,
    each item's correctness in the outer fold that tested it)."""
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    dev_scores, test_scores = [], []
    correct = np.zeros(labels.shape[0])
    for train, test in outer.split(features, labels):
        c, dev = _cv_choose(features[train], labels[train], INNER_REGS, inner_folds, seed)
        dev_scores.append(dev)
        accuracy, correct[test] = _tested(_fit(features[train], labels[train], c, seed), features[test], labels[test])
        test_scores.append(accuracy)
    return float(np.mean(dev_scores)), float(np.mean(test_scores)), correct


def kfold_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, *,
                   folds: int = 10, seed: int = 0) -> tuple[float, float, np.ndarray]:
    """SentEval KFoldClassifier: C by k-fold CV on train; (CV accuracy, test accuracy in %, per-item correctness)."""
    c, dev = _cv_choose(train_x, train_y, KFOLD_REGS, folds, seed)
    return dev, *_tested(_fit(train_x, train_y, c, seed), test_x, test_y)


def split_accuracy(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, dev_y: np.ndarray,
                   test_x: np.ndarray, test_y: np.ndarray, *, seed: int = 0) -> tuple[float, float, np.ndarray]:
    """SentEval SplitClassifier: C chosen on dev; (dev accuracy, test accuracy in %, per-item correctness)."""
    dev_scores = [round(100 * _fit(train_x, train_y, c, seed).score(dev_x, dev_y), 2) for c in INNER_REGS]
    best = int(np.argmax(dev_scores))
    return dev_scores[best], *_tested(_fit(train_x, train_y, INNER_REGS[best], seed), test_x, test_y)


def pair_features(u: np.ndarray, v: np.ndarray, kind: str = "senteval") -> np.ndarray:
    """Features of sentence pairs: ``senteval`` [|u−v|, u∘v] or ``full`` [u, v, |u−v|, u∘v]."""
    if kind == "senteval":
        return np.hstack([np.abs(u - v), u * v])
    if kind == "full":
        return np.hstack([u, v, np.abs(u - v), u * v])
    raise InputError(f"unknown pair features {kind!r}; expected 'senteval' or 'full'")


@dataclass(frozen=True)
class _Split:
    x: np.ndarray
    y: np.ndarray


class ClassificationTask(Task):
    """One SentEval transfer task (mr, cr, subj, mpqa, sst2, sst5, trec, mrpc, sick-e) or a user
    labelled-texts file (nested 10-fold cross-validation)."""

    name = "classification"
    description = "SentEval logistic-regression transfer tasks on frozen embeddings (pooling paper §3.5.3)"
    datasets = CV_SETS + ("sst2", "trec", "mrpc", "sst5", "sick-e")
    options = ("seed", "pair_features")
    user_files = True
    headline_metric = "accuracy"
    metrics = {
        "accuracy": Metric("test accuracy (10-fold mean for MR/CR/SUBJ/MPQA and user files), 0–1", unit="fraction"),
        "dev_accuracy": Metric("validation accuracy of the chosen regularisation, 0–1", unit="fraction"),
    }

    def __init__(self, dataset: str, *, path: str | None = None, folds: int = 10, inner_folds: int = 10,
                 seed: int = 0, pair_features: str = "senteval") -> None:
        super().__init__(dataset)
        self.path, self.folds, self.inner_folds, self.seed = path, folds, inner_folds, seed
        self.pair_features = pair_features
        if path is None and dataset not in self.datasets:
            raise InputError(f"unknown classification dataset {dataset!r}; expected one of {', '.join(self.datasets)}")

    def _encoded(self, texts: list[str]) -> list[str]:
        """SentEval's sets as its reference batchers pass them on (an empty sentence becomes '.'); a user's
        file as it is (an empty text there is the method's to refuse, naming its line)."""
        return texts if self.path is not None else batcher_texts(texts)

    def _texts(self, method: Method, splits: list[LabelledTexts]) -> list[_Split]:
        vectors = embed(method, *[self._encoded(s.texts) for s in splits])
        return [_Split(np.asarray(v, dtype=np.float64), s.labels) for v, s in zip(vectors, splits)]

    def _pairs(self, method: Method, splits: list[LabelledPairs]) -> list[_Split]:
        sides = [self._encoded(side) for s in splits for side in (s.first, s.second)]
        vectors = [np.asarray(v, dtype=np.float64) for v in embed(method, *sides)]
        return [_Split(pair_features(vectors[2 * k], vectors[2 * k + 1], self.pair_features), s.labels)
                for k, s in enumerate(splits)]

    def check_data(self) -> None:
        name = self.dataset
        if self.path is not None or name in CV_SETS:
            load_labelled_texts(self.path) if self.path else senteval_binary(name)
        elif name == "trec":
            trec("train"), trec("test")
        elif name == "mrpc":
            mrpc("train"), mrpc("test")
        elif name == "sick-e":
            [sick_entailment(split) for split in ("train", "trial", "test")]
        else:
            [sst(name == "sst5", split) for split in ("train", "dev", "test")]

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        name, seed = self.dataset, self.seed
        if self.path is not None or name in CV_SETS:
            data = load_labelled_texts(self.path) if self.path else senteval_binary(name)
            (whole,) = self._texts(method, [data])
            try:
                dev, test, correct = nested_cv_accuracy(whole.x, whole.y, folds=self.folds, inner_folds=self.inner_folds, seed=seed)
            except ValueError as error:  # scikit-learn's fold check: say which file is too small, and how
                counts = dict(zip(data.label_names, np.bincount(data.labels).tolist()))
                raise DataFormatError(f"{self.path or name}: {len(data)} texts (per label {counts}) are too few for "
                                      f"nested {self.folds}x{self.inner_folds}-fold cross-validation ({error})") from None
            n, protocol = len(data), f"{self.folds}-fold"
        elif name == "trec":
            train, test_split = self._texts(method, [trec("train"), trec("test")])
            dev, test, correct = kfold_accuracy(train.x, train.y, test_split.x, test_split.y, folds=self.folds, seed=seed)
            n, protocol = test_split.y.size, "test"
        elif name == "mrpc":
            train, test_split = self._pairs(method, [mrpc("train"), mrpc("test")])
            dev, test, correct = kfold_accuracy(train.x, train.y, test_split.x, test_split.y, folds=self.folds, seed=seed)
            n, protocol = test_split.y.size, "test"
        else:
            if name == "sick-e":
                train, dev_split, test_split = self._pairs(
                    method, [sick_entailment(s) for s in ("train", "trial", "test")])
            else:
                fine = name == "sst5"
                train, dev_split, test_split = self._texts(method, [sst(fine, s) for s in ("train", "dev", "test")])
            dev, test, correct = split_accuracy(train.x, train.y, dev_split.x, dev_split.y, test_split.x, test_split.y, seed=seed)
            n, protocol = test_split.y.size, "test"
        # The protocol selects on SentEval's rounded percentages; records hold fractions (the unit convention).
        # The units are the test items (each item of a cross-validated set is tested once, by its outer fold;
        # there the interval is of the pooled accuracy, within a hundredth of a point of the fold mean).
        return [
            self.record(method, protocol, "accuracy", test / 100, n, UnitScores("items", "mean", {"score": correct})),
            self.record(method, protocol, "dev_accuracy", dev / 100, n,
                        note="the accuracy that chose the regularisation (model selection): no interval"),
        ]
