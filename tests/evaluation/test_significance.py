"""Tests for embedlab.evaluation.significance: the analytic tests against published worked examples,
Holm's correction by hand, and the paired bootstrap on synthetic methods with a known difference."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from embedlab.errors import InputError
from embedlab.evaluation.records import UnitScores
from embedlab.evaluation.significance import (
    check_same_units,
    dependent_correlations,
    holm,
    paired_difference,
    steiger_z,
    williams_t,
    zou_interval,
)


def test_williams_and_steiger_equal_the_published_example() -> None:
    # Silver, Hittner & May (2006), "A FORTRAN 77 program for comparing dependent correlations", Applied
    # Psychological Measurement 30, 152–153: r_jk = .3, r_jh = .4, r_kh = .5, n = 100 gives Williams'
    # t = −1.0767 (p = .2843) and Steiger's Z = −1.0718 (p = .2838).
    t, p = williams_t(0.3, 0.4, 0.5, 100)
    assert (round(t, 4), round(p, 4)) == (-1.0767, 0.2843)
    z, p = steiger_z(0.3, 0.4, 0.5, 100)
    assert (round(z, 4), round(p, 4)) == (-1.0718, 0.2838)
    # Steiger (1980), Psychological Bulletin 87, 245–251, Case A (p. 249): r_jk = .4, r_jh = .5, r_kh = .1,
    # n = 103 prints Z = −.8913 from a covariance rounded to .0042; unrounded it is −.8887
    assert steiger_z(0.4, 0.5, 0.1, 103)[0] == pytest.approx(-0.8913, abs=0.003)


def test_zou_interval_equals_the_papers_example() -> None:
    # Zou (2007), "Toward using confidence intervals to compare correlations", Psychological Methods 12,
    # 399–413, the example of two overlapping correlations: r12 = .396, r13 = .179, r23 = .088, n = 66
    # gives the 95 % interval (−.093, .517) for ρ12 − ρ13.
    low, high = zou_interval(0.396, 0.179, 0.088, 66)
    assert (round(low, 3), round(high, 3)) == (-0.093, 0.517)


def test_holm_by_hand() -> None:
    # sorted .005, .01, .03, .04 (m = 4): × 4, 3, 2, 1 = .02, .03, .06, .04 → running maximum .02, .03, .06, .06
    assert holm([0.01, 0.04, 0.03, None, 0.005]) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert holm([0.9, 0.8]) == [1.0, 1.0]


def _methods(n: int = 300, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.normal(size=n)
    return gold, gold + rng.normal(scale=0.5, size=n), gold + rng.normal(scale=1.5, size=n)


def test_paired_bootstrap_finds_a_real_difference_and_not_a_null_one() -> None:
    gold, good, poor = _methods()
    units = {name: UnitScores("pairs", "spearman", {"predicted": values, "gold": gold})
             for name, values in (("good", good), ("poor", poor), ("twin", good + 1e-9 * np.arange(gold.size)))}
    real = paired_difference(units["poor"], units["good"], 1000, 0)
    expected = stats.spearmanr(poor, gold).statistic - stats.spearmanr(good, gold).statistic
    assert real.diff == pytest.approx(expected) and real.low < expected < real.high < 0
    assert real.p == pytest.approx(2 / 1001)  # no resample of 1,000 puts the difference at or above 0
    assert paired_difference(units["poor"], units["good"], 1000, 0) == real  # same seed, same resamples
    null = paired_difference(units["good"], units["poor"], 1000, 0)
    assert null.diff == pytest.approx(-expected)
    analytic = dependent_correlations(units["poor"], units["good"])
    assert analytic.zou_low < expected < analytic.zou_high and analytic.williams_p < 0.001


def test_units_that_do_not_pair_are_refused() -> None:
    gold, good, _ = _methods()
    first = UnitScores("pairs", "spearman", {"predicted": good, "gold": gold})
    with pytest.raises(InputError, match="cover different units"):
        check_same_units(first, UnitScores("pairs", "spearman", {"predicted": good[:-1], "gold": gold[:-1]}), "sts/x")
    with pytest.raises(InputError, match="their gold arrays differ"):
        check_same_units(first, UnitScores("pairs", "spearman", {"predicted": good, "gold": gold[::-1]}), "sts/x")
    few = UnitScores("pairs", "spearman", {"predicted": good[:9], "gold": gold[:9]})
    with pytest.raises(InputError, match="fewer than the 10"):
        check_same_units(few, few, "sts/x")
