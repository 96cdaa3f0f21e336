import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.preprocessing import QuantileTransformer

import embedlab

from embedlab.pooling.postprocess import (
    STEP_NAMES,
    STEPS,
    AllButTheTop,
    Chain,
    Normalize,
    QuantileNormalization,
    Whitening,
    ZScore,
    column_percentiles,
    make_step,
    parse_chain,
)


@pytest.fixture
def vectors():
    rng = np.random.default_rng(0)
    mixing = rng.normal(size=(8, 8))
    return (rng.normal(size=(300, 8)) @ mixing + 3.0).astype(np.float32)


def test_zscore_gives_zero_mean_unit_variance(vectors):
    out = ZScore().fit_transform(vectors)
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(out.std(0), 1, atol=1e-4)


def test_zscore_only_centres_negligible_features(vectors):
    vectors = vectors.astype(np.float64)
    vectors[:, 3] = 1e-32 * np.random.default_rng(2).normal(size=len(vectors))
    out = ZScore().fit_transform(vectors)
    assert np.abs(out[:, 3]).max() < 1e-30
    np.testing.assert_allclose(out[:, [0, 1, 2, 4]].std(0), 1, atol=1e-4)


def test_whitened_covariance_is_identity(vectors):
    out = Whitening().fit_transform(vectors)
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(8), atol=1e-4)


def test_whitening_drops_directions_without_variance():
    rng = np.random.default_rng(1)
    flat = rng.normal(size=(50, 3)) @ rng.normal(size=(3, 6))  # rank 3 in 6 dimensions
    out = Whitening().fit_transform(flat)
    assert out.shape == (50, 3)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(3), atol=1e-4)


def test_abtt_output_is_orthogonal_to_removed_directions(vectors):
    step = AllButTheTop(2).fit(vectors)
    out = step.transform(vectors)
    components = step.state["components"]
    np.testing.assert_allclose(out @ components.T, 0, atol=1e-4)
    # what remains equals the centred data minus its projection, computed directly
    centred = vectors - vectors.mean(0)
    np.testing.assert_allclose(out, centred - centred @ components.T @ components, atol=1e-4)


def test_quantile_uniform_equals_scikit_learn(vectors):
    out = QuantileNormalization("uniform").fit_transform(vectors)
    reference = QuantileTransformer(n_quantiles=300, output_distribution="uniform", random_state=0).fit_transform(vectors)
    np.testing.assert_allclose(out, reference, atol=1e-6)
    assert out.min() >= 0 and out.max() <= 1


@pytest.mark.parametrize("rows", [2758, 12_000])
def test_quantile_fit_equals_scikit_learn_on_large_inputs(rows):
    rng = np.random.default_rng(3)
    vectors = (rng.normal(size=(rows, 16)) ** 3).astype(np.float32)
    ours = QuantileNormalization("uniform").fit(vectors)
    reference = QuantileTransformer(n_quantiles=1000, output_distribution="uniform", random_state=0).fit(vectors)
    np.testing.assert_allclose(ours.state["quantiles"], reference.quantiles_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.transform(vectors[:500]), reference.transform(vectors[:500]), atol=1e-6)


@pytest.mark.parametrize("rows", [1, 2, 7, 999, 1000, 2758])
def test_column_percentiles_are_bit_identical_to_numpy(rows):
    rng = np.random.default_rng(rows)
    vectors = rng.normal(size=(rows, 5)) ** 3
    vectors[:, 2] = 0.5  # a constant column
    quantiles = np.linspace(0, 1, min(1000, rows), endpoint=True)
    expected = np.percentile(vectors, quantiles * 100, axis=0)
    assert np.array_equal(column_percentiles(vectors, quantiles), expected)


def test_fast_and_full_svd_give_the_same_whitening_and_abtt():
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(400, 20)) @ rng.normal(size=(20, 20))  # n >= 2d: the covariance route
    for solver_step in (Whitening, lambda: AllButTheTop(3)):
        fast = solver_step().fit_transform(vectors)
        full = solver_step()
        full.state = full._fit_with(vectors.astype(np.float64), "full")
        np.testing.assert_allclose(np.abs(fast), np.abs(full.transform(vectors)), atol=1e-4)


def test_normalize_makes_unit_vectors(vectors):
    np.testing.assert_allclose(np.linalg.norm(Normalize().transform(vectors), axis=1), 1, rtol=1e-6)


def _registered_names() -> list[str]:
    """One spec name of every registered step (abtt-D as abtt-2)."""
    return [spelling.replace("-D", "-2") for kind in STEPS for spelling in kind.spellings]


def test_every_registered_step_has_a_help_line_and_is_made_from_its_spelling():
    assert STEP_NAMES == ("zscore", "quantile-u", "quantile-n", "whiten", "abtt-D", "normalize")
    for kind in STEPS:
        for spelling, help_line in kind.spellings.items():
            assert help_line.strip() and "\n" not in help_line, spelling
            step = make_step(spelling.replace("-D", "-2"))
            assert isinstance(step, kind) and step.name == spelling.replace("-D", "-2")


def test_every_registered_step_round_trips_through_a_saved_chain_without_pickle(vectors, tmp_path):
    names = _registered_names()
    chain = Chain([make_step(name) for name in names])
    out = chain.fit_transform(vectors)
    chain.save(tmp_path / "chain.safetensors")
    loaded = Chain.load(tmp_path / "chain.safetensors")
    np.testing.assert_array_equal(loaded.transform(vectors), out)
    assert [step.name for step in loaded.steps] == names


@pytest.mark.parametrize("name", _registered_names())
def test_a_fitted_step_is_affine_exactly_when_it_says_so(vectors, name):
    # an affine map keeps affine combinations: f(a·x + (1 - a)·y) = a·f(x) + (1 - a)·f(y)
    step = make_step(name).fit(vectors)
    x, y = (np.random.default_rng(1).normal(size=(2, 40, 8)) * 4 + 3).astype(np.float32)
    combined = step.transform(0.3 * x + 0.7 * y).astype(np.float64)
    mixed = 0.3 * step.transform(x).astype(np.float64) + 0.7 * step.transform(y).astype(np.float64)
    assert np.allclose(combined, mixed, rtol=1e-4, atol=1e-4 * np.abs(mixed).max()) == step.affine


def test_parse_chain():
    assert parse_chain("zscore+quantile-u@ref+normalize") == [("zscore", False), ("quantile-u", True), ("normalize", False)]
    assert parse_chain("none") == []
    with pytest.raises(ValueError, match="unknown post-processing step"):
        parse_chain("pca")


def test_unfitted_step_refuses_to_transform(vectors):
    with pytest.raises(RuntimeError, match="not fitted"):
        ZScore().transform(vectors)


def test_a_process_that_encodes_without_fitting_a_step_never_imports_scikit_learn():
    """scikit-learn (≈ 1 s of a start) is imported by the first step that is fitted, not by loading a method:
    every CLI run, Ray actor and child process that only encodes would otherwise pay for it."""
    code = ("import sys\nimport embedlab.registry, embedlab.methods.pooled, embedlab.engines.ray_engine\n"
            "print('sklearn' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(Path(embedlab.__file__).resolve().parent.parent)})
    assert result.stdout.strip() == "False", result.stdout
    assert ZScore().fit(np.eye(3, dtype=np.float32)).state["mean"].shape == (3,)  # and a fitted step still finds it
