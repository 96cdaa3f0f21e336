"""embedlab.interop.sklearn: post-processing chains and methods as scikit-learn transformers."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from embedlab.interop.sklearn import Encoder, PostProcessing


def data(seed: int, rows: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(rows, 6)) * [1, 2, 3, 4, 5, 6] + 10).astype(np.float32)


def test_fitted_on_train_only_and_applied_unchanged():
    train, test = data(0), data(1)
    steps = PostProcessing("zscore").fit(train)
    np.testing.assert_allclose(steps.transform(test), StandardScaler().fit(train).transform(test), atol=1e-5)
    whitened = PostProcessing("whiten").fit_transform(train)  # PCA variances are unbiased (n − 1)
    np.testing.assert_allclose(np.cov(whitened, rowvar=False), np.eye(6), atol=1e-4)
    unit = PostProcessing("zscore+normalize").fit(train).transform(test)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)


def test_estimator_protocol_and_clear_errors():
    with pytest.raises(NotFittedError):
        PostProcessing().transform(data(0))
    with pytest.raises(ValueError, match="'@ref' steps are fitted inside a method spec"):
        PostProcessing("whiten@ref").fit(data(0))
    with pytest.raises(ValueError, match="unknown post-processing step 'pca'"):
        PostProcessing("pca").fit(data(0))
    pipeline = make_pipeline(PostProcessing("zscore"), StandardScaler())
    assert clone(pipeline).get_params()["postprocessing__chain"] == "zscore"
    assert Encoder("minilm", batch_size=8).get_params() == {"spec": "minilm", "batch_size": 8}
    with pytest.raises(TypeError, match="pairwise method"):
        Encoder("match:minilm").fit(["a"])


def test_grid_search_over_the_chain():
    from sklearn.linear_model import LogisticRegression

    x = data(2, 80)
    y = (x[:, 0] > 10).astype(int)
    search = GridSearchCV(make_pipeline(PostProcessing(), LogisticRegression()),
                          {"postprocessing__chain": ["zscore", "none", "quantile-u"]}, cv=2).fit(x, y)
    assert search.best_params_["postprocessing__chain"] in ("zscore", "none", "quantile-u")
    assert 0.5 < search.best_score_ <= 1
