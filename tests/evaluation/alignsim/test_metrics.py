"""embedlab.evaluation.alignsim.metrics: NED on hand-computed vectors and against the cosine, α/β, ε pass rates."""

from __future__ import annotations

import numpy as np
import pytest

from embedlab.evaluation.alignsim import metrics
from embedlab.evaluation.scoring import cosines


@pytest.mark.parametrize(
    ("u", "v", "expected"),
    [
        ([1, 2, 3], [2, 3, 4], 0.0),  # equal up to a constant shift
        ([1, 2, 3], [3, 2, 1], 1.0),  # centred vectors opposite
        ([1, -1, 0, 0], [0, 0, 1, -1], 0.5),  # centred vectors orthogonal
        ([0, 1, 2], [0, 0, 3], 0.125),  # ½·‖[0,1,-1]‖² / (2 + 6)
        ([1, 2, 3], [2, 4, 6], 0.1),  # v−v̄ = 2(u−ū): ½·‖u−ū‖² / (5‖u−ū‖²)
    ],
)
def test_ned_hand_computed(u, v, expected):
    assert metrics.ned(np.array(u, float), np.array(v, float))[0] == pytest.approx(expected, abs=1e-7)


def test_ned_is_in_unit_interval_and_symmetric():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(500, 16)), rng.normal(size=(500, 16)) * rng.uniform(0.1, 10, size=(500, 1))
    values = metrics.ned(a, b)
    assert values.dtype == np.float32
    assert (values >= 0).all() and (values <= 1).all()
    np.testing.assert_allclose(values, metrics.ned(b, a), rtol=1e-6)
    assert metrics.ned(a, -a + 3.0).max() == pytest.approx(1.0, abs=1e-6)  # the upper bound is reached


def test_ned_equals_half_cosine_distance_for_centred_unit_vectors():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(50, 8)), rng.normal(size=(50, 8))
    a -= a.mean(axis=1, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    np.testing.assert_allclose(metrics.ned(a, b), (1 - cosines(a, b)) / 2, atol=1e-6)


def test_alpha_is_one_minus_the_mean_of_dataset_means():
    # dataset means 0.2 and 0.6 (sizes differ: the mean of means, not the pooled mean 0.4667)
    random_sims = [np.array([0.1, 0.3]), np.array([0.5, 0.6, 0.7])]
    assert metrics.alpha(random_sims) == pytest.approx(0.6)
    assert metrics.alpha_adjusted(0.9, 0.6) == pytest.approx(0.54)
    with pytest.raises(ValueError):
        metrics.alpha([np.array([])])


def test_beta_adjustment_eq2():
    level = metrics.random_ned_level([np.array([0.4, 0.5]), np.array([0.35])])  # means 0.45, 0.35
    assert level == pytest.approx(0.4)
    assert metrics.beta_adjusted(0.1, level) == pytest.approx(1 - 0.9 * 0.6)
    assert metrics.beta_adjusted(0.0, 0.0) == pytest.approx(0.0)  # identical pairs, random pairs identical too


def test_pass_rates_count_strictly_greater_margins():
    rates = metrics.pass_rates(np.array([-0.1, 0.05, 0.2, 0.5]), (0.0, 0.1, 0.3, 0.5))
    np.testing.assert_allclose(rates, [0.75, 0.5, 0.25, 0.0])


def test_ned_rejects_constant_vectors():
    with pytest.raises(ValueError, match="constant"):
        metrics.ned(np.ones((1, 3)), np.full((1, 3), 2.0))


def test_epsilon_grids_are_rounded_multiples_of_the_step():
    assert metrics.epsilon_grid(0.3, 0.1) == (0.0, 0.1, 0.2, 0.3)
    assert metrics.epsilon_grid(0.0, 0.05) == (0.0,)
    with pytest.raises(ValueError, match="not a non-negative multiple"):
        metrics.epsilon_grid(0.25, 0.1)


def test_fit_epsilon_grid_picks_the_grid_closest_to_all_targets_jointly():
    # averaged pass rates by grid end E (hand-computed): A: E=0 1.0, 0.1 0.875, 0.2 0.75, 0.3 0.625;
    # B: 1.0, 0.75, 0.6667, 0.625. Squared errors to (0.76, 0.70): 0.1476, 0.0157, 0.0012, 0.0239 -> E = 0.2
    margins = {"a": np.array([0.02, 0.12, 0.22, 0.32]), "b": np.array([0.05, 0.5])}
    end, averages = metrics.fit_epsilon_grid(margins, {"a": 0.76, "b": 0.70}, step=0.1, largest=0.3)
    assert end == 0.2
    assert averages == pytest.approx({"a": 0.75, "b": 2 / 3})
    # one dataset alone is fitted by its own closest grid
    assert metrics.fit_epsilon_grid(margins, {"b": 0.74}, step=0.1, largest=0.3)[0] == 0.1
    with pytest.raises(ValueError, match="no margins"):
        metrics.fit_epsilon_grid(margins, {"c": 0.5})
