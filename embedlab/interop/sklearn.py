"""embedlab inside scikit-learn pipelines: a method as a transformer of texts, post-processing as a
transformer of vectors.

    from sklearn.pipeline import make_pipeline
    from sklearn.linear_model import LogisticRegression
    from embedlab.interop.sklearn import Encoder, PostProcessing

    classifier = make_pipeline(Encoder("minilm"), PostProcessing("zscore+normalize"), LogisticRegression())
    classifier.fit(train_texts, train_labels).score(test_texts, test_labels)

Both are ordinary scikit-learn estimators (``get_params``/``set_params``, ``clone``, grid search over
``postprocessing__chain``): the post-processing steps are the ones a spec's ``post=`` option names
(:mod:`embedlab.pooling.postprocess`), fitted in ``fit`` on the training vectors only and applied
unchanged in ``transform`` — the target-fitted protocol of the pooling paper, without leaking test data.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from embedlab.errors import InputError, InputTypeError
from embedlab.methods.base import VectorMethod
from embedlab.registry import load
from embedlab.pooling.postprocess import Chain, make_step, parse_chain


class Encoder(TransformerMixin, BaseEstimator):
    """Texts → float32 embeddings of the method ``spec`` (``fit`` loads it; it learns nothing from ``X``)."""

    def __init__(self, spec: str = "minilm", batch_size: int = 32) -> None:
        self.spec = spec
        self.batch_size = batch_size

    def fit(self, X: Iterable[str], y=None) -> Encoder:
        method = load(self.spec)
        if not isinstance(method, VectorMethod):
            raise InputTypeError(f"{self.spec} is a pairwise method: a pipeline needs one embedding per text")
        self.method_ = method
        return self

    def transform(self, X: Iterable[str]) -> np.ndarray:
        check_is_fitted(self, "method_")
        return self.method_.encode(list(X), batch_size=self.batch_size, show_progress_bar=False)


class PostProcessing(TransformerMixin, BaseEstimator):
    """A ``post=`` chain such as ``"zscore"``, ``"whiten"`` or ``"quantile-u+normalize"``: each step is
    fitted on the previous step's output of the ``fit`` vectors (``@ref``, which fits on WikiText-2
    through a method, belongs in a spec, not here)."""

    def __init__(self, chain: str = "zscore") -> None:
        self.chain = chain

    def fit(self, X: np.ndarray, y=None) -> PostProcessing:
        self.fit_transform(X)
        return self

    def fit_transform(self, X: np.ndarray, y=None) -> np.ndarray:
        steps = parse_chain(self.chain)
        if any(on_reference for _, on_reference in steps):
            raise InputError(f"post-processing chain {self.chain!r}: '@ref' steps are fitted inside a method spec "
                             "(e.g. minilm:post=whiten@ref), not in a pipeline")
        self.chain_ = Chain([make_step(name) for name, _ in steps])
        return self.chain_.fit_transform(np.asarray(X, dtype=np.float32))

    def transform(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "chain_")
        return self.chain_.transform(np.asarray(X, dtype=np.float32))
