"""Tests for embedlab.evaluation.bootstrap: the vectorised statistics equal scipy's on every resample, the
intervals cover known population values at the nominal rate, reruns are bit-identical, and undefined
intervals say why."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from embedlab.errors import InputError
from embedlab.evaluation.bootstrap import check_resamples, interval, point, statistic, with_interval
from embedlab.evaluation.records import Record, UnitScores


def _scored(n: int = 60, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Predicted and gold scores with many ties (rounded), as STS gold scores have."""
    rng = np.random.default_rng(seed)
    predicted = np.round(rng.normal(size=n), 1)
    return predicted, np.round(predicted + rng.normal(size=n), 0)


@pytest.mark.parametrize("name, reference", [
    ("spearman", lambda a, b: stats.spearmanr(a, b).statistic),
    ("pearson", lambda a, b: stats.pearsonr(a, b).statistic),
    ("kendall_b", lambda a, b: stats.kendalltau(a, b, variant="b").statistic),
    ("kendall_c", lambda a, b: stats.kendalltau(a, b, variant="c").statistic),
])
def test_correlations_of_every_resample_equal_scipy(name, reference) -> None:
    predicted, gold = _scored()
    units = UnitScores("pairs", name, {"predicted": predicted, "gold": gold})
    indices = np.random.default_rng(5).integers(0, predicted.size, (6, predicted.size))
    expected = [reference(predicted[row], gold[row]) for row in indices]
    np.testing.assert_allclose(statistic(units, indices), expected, rtol=0, atol=1e-12)
    assert point(units) == pytest.approx(reference(predicted, gold), abs=1e-12)


def test_shares_of_every_resample_equal_direct_counts() -> None:
    predicted, _ = _scored()
    similar = (np.arange(predicted.size) % 3 == 0).astype(float)
    indices = np.random.default_rng(7).integers(0, predicted.size, (5, predicted.size))
    tuples = UnitScores("pairs", "tuple_error", {"predicted": predicted, "similar": similar})
    expected = [np.mean(predicted[row][similar[row] == 1][:, None] <= predicted[row][similar[row] == 0][None, :]) for row in indices]
    np.testing.assert_allclose(statistic(tuples, indices), expected, atol=1e-15)
    numerator, denominator = np.arange(60.0), np.arange(60.0) + 5
    ratio = UnitScores("anchors", "ratio", {"numerator": numerator, "denominator": denominator})
    np.testing.assert_allclose(statistic(ratio, indices), [numerator[r].sum() / denominator[r].sum() for r in indices])


def _coverage(draw, statistic_name: str, truth: float) -> float:
    """The share of 200 samples whose interval covers ``truth``. B = 500 halves the test's cost; B sets how
    finely the percentiles are estimated, not where they lie, so the coverage is that of the default 1,000."""
    rng = np.random.default_rng(2026)
    covered = 0
    for repetition in range(200):
        found = interval(UnitScores("units", statistic_name, draw(rng)), 500, repetition)
        covered += found.low <= truth <= found.high
    return covered / 200


def test_intervals_cover_known_population_values_at_the_nominal_rate() -> None:
    # 200 samples of 60 pairs from a bivariate normal with ρ = 0.5: Spearman's population value is
    # (6/π)·arcsin(ρ/2) (Pearson 1907); and 60 items answered correctly with probability 0.8 (an accuracy)
    rho = 0.5

    def pairs(rng):
        x = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=60)
        return {"predicted": x[:, 0], "gold": x[:, 1]}

    assert 0.92 <= _coverage(pairs, "spearman", 6 / np.pi * np.arcsin(rho / 2)) <= 0.98
    assert 0.92 <= _coverage(lambda rng: {"score": (rng.random(60) < 0.8).astype(float)}, "mean", 0.8) <= 0.98


def test_reruns_are_bit_identical_and_the_seed_matters() -> None:
    predicted, gold = _scored(200)
    units = UnitScores("pairs", "kendall_b", {"predicted": predicted, "gold": gold})
    first, again, other = interval(units, 300, 0), interval(units, 300, 0), interval(units, 300, 1)
    assert (first.low, first.high) == (again.low, again.high)
    assert (first.low, first.high) != (other.low, other.high)
    assert first.low < point(units) < first.high and first.resamples == 300 and first.resampled == "pairs"


def test_undefined_intervals_give_a_reason_not_nan() -> None:
    few = interval(UnitScores("items", "mean", {"score": np.ones(9)}), 100, 0)
    assert few.low is None and few.note == "fewer than 10 items (9)"
    constant = interval(UnitScores("items", "mean", {"score": np.ones(50)}), 100, 0)
    assert constant.low is None and constant.note.startswith("constant score")
    record = Record("m", "classification", "trec", "test", "accuracy", 1.0, 50,
                    units=UnitScores("items", "mean", {"score": np.ones(50)}))
    shown = with_interval(record, 100, 0)
    assert shown.ci_low is None and shown.ci_high is None and "constant score" in shown.ci_note
    assert with_interval(record, 0, 0).interval() == {"ci_low": None, "ci_high": None, "ci_resamples": None,
                                                      "ci_resampled": None, "ci_note": None}
    counted = Record("m", "pairs", "sts", "all", "total", 10.0, 10, ci_note="a count")
    assert with_interval(counted, 100, 0).ci_note == "a count"


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_bad_resample_counts_are_one_clear_error(bad) -> None:
    with pytest.raises(InputError, match="--bootstrap must be a whole number"):
        check_resamples(bad)


def test_quadratic_statistics_beyond_the_budget_give_a_note_not_minutes_of_work(monkeypatch) -> None:
    from embedlab.evaluation import bootstrap

    monkeypatch.setattr(bootstrap, "MAX_UNIT_PAIRS", 50 ** 2)
    predicted, gold = _scored(51)
    found = interval(UnitScores("pairs", "kendall_b", {"predicted": predicted, "gold": gold}), 100, 0)
    assert found.low is None and "more than 2,500 unit pairs" in found.note
    assert interval(UnitScores("pairs", "spearman", {"predicted": predicted, "gold": gold}), 100, 0).low is not None


def test_resamples_are_drawn_in_chunks_of_bounded_memory_with_the_draws_of_one_matrix(monkeypatch) -> None:
    """With a chunk of 64 indices over 10 units, no call sees more than 6 resamples at once, and the B values
    equal scipy's unchunked draw from the same seed (bit-identical: the same index rows, each scored alone)."""
    from embedlab.evaluation import bootstrap

    units = UnitScores("items", "mean", {"score": np.arange(10, dtype=np.float64) ** 2})
    seen: list[int] = []

    def scored(indices: np.ndarray) -> np.ndarray:
        seen.append(indices.shape[0])
        return statistic(units, indices)

    monkeypatch.setattr(bootstrap, "_RESAMPLE_ENTRIES", 64)
    values = bootstrap.distribution(scored, 10, 100, seed=3)
    assert max(seen) == 6 and sum(seen) == 100
    whole = stats.bootstrap((np.arange(10),), lambda indices, axis=-1: statistic(units, indices), n_resamples=100,
                            vectorized=True, method="percentile", rng=np.random.default_rng(3))
    assert np.array_equal(values, whole.bootstrap_distribution)


def test_a_huge_resample_count_is_refused_before_any_work_and_one_resample_warns_nothing() -> None:
    with pytest.raises(InputError, match="--bootstrap 10000000 is more than the 1,000,000 resamples"):
        check_resamples(10_000_000)
    units = UnitScores("items", "mean", {"score": np.arange(20, dtype=np.float64)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's standard error of one resample used to leak two RuntimeWarnings
        found = interval(units, 1, 0)
    assert (found.low, found.high) == (None, None) and "--bootstrap needs at least 2" in found.note
