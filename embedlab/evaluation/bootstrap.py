"""Bootstrap confidence intervals from per-unit scores (docs/evaluation.md, "Uncertainty").

A record's units (:class:`~embedlab.evaluation.records.UnitScores`: pairs, queries, items, anchors …) are
resampled with replacement B times; the statistic that gave the record's value is recomputed on every
resample, vectorised over ONE B × n index matrix (``scipy.stats.bootstrap`` draws it; every statistic
below takes the whole matrix, no Python loop over resamples), and the interval is the 2.5 and 97.5
percentiles of the B values.

Percentile, not BCa: percentile intervals respect the statistic's range (a correlation's interval stays
inside −1…1, an error rate's inside 0…1), need no jackknife (n more evaluations of an O(n²) Kendall τ on
thousands of pairs), and the coverage tests (tests/evaluation/test_bootstrap.py) find 92–98 % coverage
at the sizes the harness meets. The same seed and B give the same index matrix, so a rerun is
bit-identical and two methods scored on the same units are resampled identically (a paired bootstrap).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from embedlab.errors import InputError
from embedlab.evaluation.records import Record, UnitScores

DEFAULT_RESAMPLES = 1000
LEVEL = 0.95
MIN_UNITS = 10  # fewer units than this give no interval (the threshold; percentiles of 9 points mislead)
_BLOCK_ENTRIES = 1 << 22  # Kendall's sign matrix is built n × block at a time: ≈ 16 MB of float32
# resamples are drawn and scored in chunks of at most this many indices (chunk × n), so memory stays bounded
# (≈ 32 MB of indices plus the statistic's arrays of the same shape) however large B is; the draws are the
# same as one B × n matrix (scipy.stats.bootstrap's ``batch`` draws the rows in order from one generator)
_RESAMPLE_ENTRIES = 1 << 22
# B beyond this buys nothing (a two-sided p-value's floor 2/(B + 1) ≈ 2e-6) and costs hours on a large
# record; the B values themselves are kept (8 bytes each)
MAX_RESAMPLES = 1_000_000
# Kendall's τ and the pair error cost B × (unit pairs) multiply-adds: above this many unit pairs (20,000² pairs
# scored, minutes on two cores at B = 1,000) a record gets a note instead of an interval
MAX_UNIT_PAIRS = 4 * 10 ** 8


def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """How often each unit is drawn in each resample: (B, n) float32 (exact: counts are small integers)."""
    resamples = indices.shape[0]
    offsets = (np.arange(resamples, dtype=np.int64) * n)[:, None]
    return np.bincount((indices + offsets).ravel(), minlength=resamples * n).reshape(resamples, n).astype(np.float32)


def _grouped(counts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the draws of each distinct value (B, distinct values), each unit's value index): units with equal
    values pooled."""
    _, inverse = np.unique(values, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
    return np.add.reduceat(counts[:, order], starts, axis=1).astype(np.float64), inverse


def _draw_ranks(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each unit's average rank among the draws of every resample (B, n), ties averaged as
    ``scipy.stats.rankdata`` does: a value drawn c times after L smaller draws ranks L + (c + 1) / 2."""
    grouped, inverse = _grouped(counts, values)
    return (np.cumsum(grouped, axis=1) - (grouped - 1) / 2)[:, inverse]


def _weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson's r of each resample given per-unit values ((B or 1), n) and draw counts (B, n); NaN where constant."""
    total = weights.sum(axis=1, keepdims=True)
    x = x - (weights * x).sum(axis=1, keepdims=True) / total
    y = y - (weights * y).sum(axis=1, keepdims=True) / total
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights * x * y).sum(axis=1) / np.sqrt((weights * x * x).sum(axis=1) * (weights * y * y).sum(axis=1))


def _kendall(units: UnitScores, indices: np.ndarray, variant: str) -> np.ndarray:
    """Kendall's τ-b or τ-c of every resample, from draw counts: a resample is the units weighted by how
    often they were drawn, so concordant minus discordant draw pairs is ½ wᵀSw with S the units' sign
    matrix sign(Δpredicted)·sign(Δgold) (one matrix product for all resamples), and tied pairs per value
    are c(c−1)/2 of the value's draw count c (as scipy.stats.kendalltau counts them)."""
    x = np.asarray(units.arrays["predicted"], dtype=np.float64)
    y = np.asarray(units.arrays["gold"], dtype=np.float64)
    n = x.size
    counts = _counts(indices, n)
    concordance = np.zeros(indices.shape[0])
    block = max(1, _BLOCK_ENTRIES // n)
    for start in range(0, n, block):  # blocks of units, not of resamples: bounds memory at n × block
        columns = slice(start, start + block)
        signs = (np.sign(x[:, None] - x[None, columns]) * np.sign(y[:, None] - y[None, columns])).astype(np.float32)
        # float32 products are exact here: every entry is an integer below 2²⁴
        concordance += np.einsum("bj,bj->b", (counts @ signs).astype(np.float64), counts[:, columns].astype(np.float64))
    difference = concordance / 2
    draws = float(n)
    (grouped_x, _), (grouped_y, _) = _grouped(counts, x), _grouped(counts, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        if variant == "b":
            pairs = draws * (draws - 1) / 2
            tied_x = (grouped_x * (grouped_x - 1) / 2).sum(axis=1)
            tied_y = (grouped_y * (grouped_y - 1) / 2).sum(axis=1)
            return difference / np.sqrt((pairs - tied_x) * (pairs - tied_y))
        distinct = np.minimum((grouped_x > 0).sum(axis=1), (grouped_y > 0).sum(axis=1)).astype(np.float64)
        return 2 * difference / (draws ** 2 * (distinct - 1) / distinct)


def _tuple_error(units: UnitScores, indices: np.ndarray) -> np.ndarray:
    """Share of (similar, non-similar) draw pairs with the similar product ≤ the non-similar one."""
    predicted = np.asarray(units.arrays["predicted"], dtype=np.float64)
    similar = np.asarray(units.arrays["similar"]) == 1
    counts = _counts(indices, predicted.size)
    similar_counts, other_counts = counts[:, similar], counts[:, ~similar]
    wrong_pairs = (predicted[similar][:, None] <= predicted[~similar][None, :]).astype(np.float32)
    wrong = np.einsum("bj,bj->b", (similar_counts @ wrong_pairs).astype(np.float64), other_counts.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return wrong / (similar_counts.sum(axis=1, dtype=np.float64) * other_counts.sum(axis=1, dtype=np.float64))


def _pearson(units: UnitScores, indices: np.ndarray) -> np.ndarray:
    x = np.asarray(units.arrays["predicted"], dtype=np.float64)
    counts = _counts(indices, x.size).astype(np.float64)
    return _weighted_pearson(x[None, :], np.asarray(units.arrays["gold"], dtype=np.float64)[None, :], counts)


def _spearman(units: UnitScores, indices: np.ndarray) -> np.ndarray:
    """Spearman's ρ of every resample: Pearson's r of the draws' average ranks, weighted by draw counts
    (no sort per resample)."""
    x = np.asarray(units.arrays["predicted"], dtype=np.float64)
    y = np.asarray(units.arrays["gold"], dtype=np.float64)
    counts = _counts(indices, x.size).astype(np.float64)
    return _weighted_pearson(_draw_ranks(counts, x), _draw_ranks(counts, y), counts)


_STATISTICS: dict[str, Callable[[UnitScores, np.ndarray], np.ndarray]] = {
    "mean": lambda units, indices: np.asarray(units.arrays["score"], dtype=np.float64)[indices].mean(axis=-1),
    "ratio": lambda units, indices: (np.asarray(units.arrays["numerator"], dtype=np.float64)[indices].sum(axis=-1)
                                     / np.asarray(units.arrays["denominator"], dtype=np.float64)[indices].sum(axis=-1)),
    "pearson": _pearson,
    "spearman": _spearman,
    "kendall_b": lambda units, indices: _kendall(units, indices, "b"),
    "kendall_c": lambda units, indices: _kendall(units, indices, "c"),
    "tuple_error": _tuple_error,
}


def statistic(units: UnitScores, indices: np.ndarray) -> np.ndarray:
    """The units' statistic on each row of ``indices`` (B × n unit indices): B values."""
    indices = np.atleast_2d(np.asarray(indices, dtype=np.int64))
    return _STATISTICS[units.statistic](units, indices)


def point(units: UnitScores) -> float:
    """The statistic on the units as they are (the record's value)."""
    return float(statistic(units, np.arange(len(units))[None, :])[0])


def check_resamples(resamples: object) -> int:
    """``resamples`` as 0 ≤ B ≤ :data:`MAX_RESAMPLES` (0: no intervals), or one clear error."""
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 0:
        raise InputError(f"--bootstrap must be a whole number ≥ 0 (0 turns intervals off), got {str(resamples)[:40]!r}")
    if resamples > MAX_RESAMPLES:
        raise InputError(f"--bootstrap {resamples} is more than the {MAX_RESAMPLES:,} resamples embedlab draws (p-values "
                         f"resolve to 2/(B + 1) ≈ {2 / (MAX_RESAMPLES + 1):.0e} there; more only costs time)")
    return int(resamples)


def distribution(statistic_of: Callable[[np.ndarray], np.ndarray], n: int, resamples: int, seed: int) -> np.ndarray:
    """``statistic_of`` (B × n indices → B values) on B resamples of n units drawn from ``seed``: the one
    index matrix ``scipy.stats.bootstrap`` draws (the same seed, B and n give the same matrix), drawn and
    scored in chunks of bounded memory."""
    with warnings.catch_warnings():
        if resamples < 2:  # scipy's standard error of one resample (ddof=1), which embedlab does not use
            warnings.filterwarnings("ignore", category=RuntimeWarning)
        result = stats.bootstrap((np.arange(n),), lambda indices, axis=-1: statistic_of(indices), n_resamples=resamples,
                                 vectorized=True, method="percentile", rng=np.random.default_rng(seed),
                                 batch=max(1, _RESAMPLE_ENTRIES // max(1, n)))
    return np.asarray(result.bootstrap_distribution, dtype=np.float64)


def percentile_interval(values: np.ndarray) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Interval:
    """A record's interval fields: bounds (None with a ``note`` when undefined), B and what was resampled."""

    low: float | None
    high: float | None
    resamples: int
    resampled: str
    note: str | None = None


def no_interval_reason(values: np.ndarray, n: int, resampled: str) -> str | None:
    """Why a bootstrap distribution gives no interval: one resample, NaN resamples, or no spread (a constant score)."""
    if values.size < 2:
        return f"one resample of the {n} {resampled} has no spread: --bootstrap needs at least 2 (default 1000)"
    undefined = int(np.isnan(values).sum())
    if undefined:
        return f"undefined in {undefined} of {values.size} resamples of the {n} {resampled} (near-constant scores)"
    if values.max() == values.min():
        return f"constant score: every resample of the {n} {resampled} gives {values[0]:.6g}"
    return None


def _unit_pairs(units: UnitScores) -> int:
    """How many pairs of units the statistic compares (0 for the statistics linear in the units)."""
    if units.statistic.startswith("kendall"):
        return len(units) ** 2
    if units.statistic == "tuple_error":
        similar = int((np.asarray(units.arrays["similar"]) == 1).sum())
        return similar * (len(units) - similar)
    return 0


def interval(units: UnitScores, resamples: int, seed: int) -> Interval:
    """The 95 % percentile bootstrap interval of the units' statistic (B = ``resamples``, drawn from ``seed``)."""
    n = len(units)
    if n < MIN_UNITS:
        return Interval(None, None, resamples, units.resampled, f"fewer than {MIN_UNITS} {units.resampled} ({n})")
    if _unit_pairs(units) > MAX_UNIT_PAIRS:
        return Interval(None, None, resamples, units.resampled, f"{units.statistic} over {n:,} {units.resampled}: "
                        f"more than {MAX_UNIT_PAIRS:,} unit pairs to resample (B × n² work); no interval")
    values = distribution(lambda indices: statistic(units, indices), n, resamples, seed)
    reason = no_interval_reason(values, n, units.resampled)
    if reason is not None:
        return Interval(None, None, resamples, units.resampled, reason)
    return Interval(*percentile_interval(values), resamples, units.resampled)


def with_interval(record: Record, resamples: int, seed: int) -> Record:
    """``record`` with its interval fields computed from its units (B = 0: no interval fields). A record
    without units keeps the reason its task gave (``ci_note``)."""
    if resamples == 0:
        return replace(record, ci_low=None, ci_high=None, ci_resamples=None, ci_resampled=None)
    if record.units is None:
        return replace(record, ci_low=None, ci_high=None, ci_resamples=None, ci_resampled=None,
                       ci_note=record.ci_note or "no per-unit scores: recompute to get an interval")
    found = interval(record.units, resamples, seed)
    return replace(record, ci_low=found.low, ci_high=found.high, ci_resamples=found.resamples,
                   ci_resampled=found.resampled, ci_note=found.note)
