"""Is one method better than another on the same units? Paired bootstrap differences, the analytic tests
for two dependent correlations that share the gold scores, and Holm's correction (docs/evaluation.md,
"Uncertainty").

* :func:`paired_difference`: the difference of a statistic between two methods scored on the same units,
  with its 95 % percentile interval and a two-sided p-value from ONE index matrix shared by both methods
  (each resample draws the same pairs, queries or items for both, so what they share cancels).
* For correlations with the same gold scores (STS, correlations), the classical tests of two dependent,
  overlapping correlations r(gold, A) and r(gold, B), given r(A, B): Williams' t (Williams 1959, as
  Steiger 1980 states it, Eq. 7), Steiger's Z (Steiger 1980, Eq. 14 with the pooled correlation) and
  Zou's (2007) interval for the difference. They assume bivariate normal scores; on Spearman's ρ they are
  applied to the ranks (the usual approximation), and the bootstrap stays the primary answer.
* :func:`holm`: Holm–Bonferroni adjusted p-values across every test of one comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from embedlab.errors import InputError
from embedlab.evaluation.bootstrap import LEVEL, MIN_UNITS, distribution, no_interval_reason, percentile_interval, point, statistic
from embedlab.evaluation.records import UnitScores

# the arrays that define the units themselves (the same for every method scored on them)
_UNIT_ARRAYS = ("gold", "similar", "denominator")


@dataclass(frozen=True)
class PairedDifference:
    """``diff`` = statistic(A) − statistic(B) on the same units, its interval and two-sided p-value (None with
    a ``note`` where undefined)."""

    diff: float
    low: float | None
    high: float | None
    p: float | None
    resamples: int
    note: str | None = None


def check_same_units(first: UnitScores, second: UnitScores, what: str) -> None:
    """One clear error unless two methods' units can be paired: same unit kind, statistic, count, and the
    same unit-defining arrays (gold scores, labels)."""
    if (first.resampled, first.statistic, len(first)) != (second.resampled, second.statistic, len(second)):
        raise InputError(f"{what}: the stored runs cover different units ({len(first)} {first.resampled} scored by "
                         f"{first.statistic} against {len(second)} {second.resampled} by {second.statistic}); "
                         "recompute both on the same data")
    for name in _UNIT_ARRAYS:
        if name in first.arrays and not np.array_equal(first.arrays[name], second.arrays[name]):
            raise InputError(f"{what}: the stored runs cover different units (their {name} arrays differ); "
                             "recompute both on the same data")
    if len(first) < MIN_UNITS:
        raise InputError(f"{what}: {len(first)} {first.resampled} are fewer than the {MIN_UNITS} a comparison needs")


def paired_difference(first: UnitScores, second: UnitScores, resamples: int, seed: int) -> PairedDifference:
    """statistic(first) − statistic(second), resampling the shared units together B times from ``seed``.

    The p-value inverts the percentile interval: twice the smaller share of resampled differences on either
    side of 0 (each count + 1 over B + 1, so it is never 0), capped at 1."""
    diff = point(first) - point(second)
    values = distribution(lambda indices: statistic(first, indices) - statistic(second, indices), len(first), resamples, seed)
    reason = no_interval_reason(values, len(first), first.resampled)
    if reason is not None:
        return PairedDifference(diff, None, None, None, resamples, reason)
    below, above = int((values <= 0).sum()), int((values >= 0).sum())
    p = min(1.0, 2 * (min(below, above) + 1) / (resamples + 1))
    return PairedDifference(diff, *percentile_interval(values), p, resamples)


def _fisher_interval(r: float, n: int) -> tuple[float, float]:
    half = stats.norm.ppf(0.5 + LEVEL / 2) / np.sqrt(n - 3)
    return float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half))


def williams_t(r_jk: float, r_jh: float, r_kh: float, n: int) -> tuple[float, float]:
    """Williams' t for H0 ρ_jk = ρ_jh (j shared, here the gold scores), given r_kh: (t, two-sided p), n − 3
    degrees of freedom (Steiger 1980, Eq. 7)."""
    determinant = 1 - r_jk ** 2 - r_jh ** 2 - r_kh ** 2 + 2 * r_jk * r_jh * r_kh
    mean = (r_jk + r_jh) / 2
    t = (r_jk - r_jh) * np.sqrt((n - 1) * (1 + r_kh) / (2 * (n - 1) / (n - 3) * determinant + mean ** 2 * (1 - r_kh) ** 3))
    return float(t), float(2 * stats.t.sf(abs(t), n - 3))


def steiger_z(r_jk: float, r_jh: float, r_kh: float, n: int) -> tuple[float, float]:
    """Steiger's Z for H0 ρ_jk = ρ_jh on Fisher's z with the pooled correlation: (Z, two-sided p)
    (Steiger 1980, Eq. 14)."""
    mean = (r_jk + r_jh) / 2
    psi = r_kh * (1 - 2 * mean ** 2) - 0.5 * mean ** 2 * (1 - 2 * mean ** 2 - r_kh ** 2)
    covariance = psi / (1 - mean ** 2) ** 2
    z = (np.arctanh(r_jk) - np.arctanh(r_jh)) * np.sqrt(n - 3) / np.sqrt(2 - 2 * covariance)
    return float(z), float(2 * stats.norm.sf(abs(z)))


def zou_interval(r_jk: float, r_jh: float, r_kh: float, n: int) -> tuple[float, float]:
    """Zou's (2007) 95 % interval for ρ_jk − ρ_jh of two overlapping correlations: each correlation's
    Fisher interval, combined with the correlation between the two estimates."""
    low_1, high_1 = _fisher_interval(r_jk, n)
    low_2, high_2 = _fisher_interval(r_jh, n)
    corr = (((r_kh - 0.5 * r_jk * r_jh) * (1 - r_jk ** 2 - r_jh ** 2 - r_kh ** 2) + r_kh ** 3)
            / ((1 - r_jk ** 2) * (1 - r_jh ** 2)))
    diff = r_jk - r_jh
    low = diff - np.sqrt((r_jk - low_1) ** 2 + (high_2 - r_jh) ** 2 - 2 * corr * (r_jk - low_1) * (high_2 - r_jh))
    high = diff + np.sqrt((high_1 - r_jk) ** 2 + (r_jh - low_2) ** 2 - 2 * corr * (high_1 - r_jk) * (r_jh - low_2))
    return float(low), float(high)


@dataclass(frozen=True)
class DependentCorrelations:
    """The analytic comparison of r(gold, A) and r(gold, B) on the same pairs."""

    williams_t: float
    williams_p: float
    steiger_z: float
    steiger_p: float
    zou_low: float
    zou_high: float


def dependent_correlations(first: UnitScores, second: UnitScores) -> DependentCorrelations | None:
    """Williams' t, Steiger's Z and Zou's interval for two methods' Pearson or Spearman correlations with
    the same gold scores (Spearman: on the ranks); None for other statistics."""
    if first.statistic not in ("pearson", "spearman"):
        return None
    rank = (lambda values: stats.rankdata(values)) if first.statistic == "spearman" else np.asarray
    gold, a, b = (rank(np.asarray(v, dtype=np.float64)) for v in (first.arrays["gold"], first.arrays["predicted"],
                                                                    second.arrays["predicted"]))
    r_ja, r_jb, r_ab = (float(np.corrcoef(x, y)[0, 1]) for x, y in ((gold, a), (gold, b), (a, b)))
    n = len(first)
    return DependentCorrelations(*williams_t(r_ja, r_jb, r_ab, n), *steiger_z(r_ja, r_jb, r_ab, n),
                                 *zou_interval(r_ja, r_jb, r_ab, n))


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values (None stays None): the k-th smallest of m is multiplied by
    m − k + 1, made non-decreasing in that order, and capped at 1."""
    present = [(p, index) for index, p in enumerate(p_values) if p is not None]
    adjusted: list[float | None] = [None] * len(p_values)
    running, m = 0.0, len(present)
    for rank, (p, index) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted
