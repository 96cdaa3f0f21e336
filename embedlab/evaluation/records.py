"""The plain result record every evaluator returns and the results database stores, and the per-unit
scores behind it (what a bootstrap resamples)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

RECORD_KEYS = ("method", "task", "dataset", "subset", "metric", "value", "n")
# The confidence-interval fields of a record (docs/evaluation.md "Uncertainty"): bounds, the number of
# bootstrap resamples B, what was resampled, and the reason when there is no interval.
CI_KEYS = ("ci_low", "ci_high", "ci_resamples", "ci_resampled", "ci_note")

# How a record's value follows from its per-unit arrays (each statistic names the arrays it reads).
STATISTICS: dict[str, tuple[str, ...]] = {
    "mean": ("score",),  # mean of the per-unit scores (accuracy: 1/0 correctness; per-query metrics)
    "ratio": ("numerator", "denominator"),  # sum/sum (triplets: broken triplets over triplets, per anchor)
    "spearman": ("predicted", "gold"),
    "pearson": ("predicted", "gold"),
    "kendall_b": ("predicted", "gold"),
    "kendall_c": ("predicted", "gold"),
    # share of (similar, non-similar) unit pairs whose similar product is not above the non-similar one
    # (pairs, Eq. 4): ``similar`` is 1 for a similar pair, 0 for a non-similar one
    "tuple_error": ("predicted", "similar"),
}


@dataclass(frozen=True, eq=False)
class UnitScores:
    """The independent units behind one record and how its value is computed from them.

    ``resampled`` names the unit (``pairs``, ``queries``, ``items``, ``anchors`` …); ``statistic`` says how
    the record's value follows from ``arrays`` (:data:`STATISTICS`); every array is 1-D with one entry per
    unit, so resampling units is indexing every array with the same index vector.
    """

    resampled: str
    statistic: str
    arrays: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        lengths = {name: np.shape(values) for name, values in self.arrays.items()}
        if len({shape for shape in lengths.values()}) > 1 or any(len(shape) != 1 for shape in lengths.values()):
            raise ValueError(f"per-unit arrays must be 1-D and of one length, got {lengths}")
        if self.statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {self.statistic!r}; expected one of {', '.join(STATISTICS)}")
        missing = set(STATISTICS[self.statistic]) - set(self.arrays)
        if missing:
            raise ValueError(f"statistic {self.statistic} needs the arrays {sorted(missing)}")

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0


@dataclass(frozen=True)
class Record:
    """One measured number: ``value`` of ``metric`` for ``method`` on ``task``/``dataset``/``subset`` over ``n`` items.

    ``units``, when the task keeps them, are the per-unit scores ``value`` was computed from. The
    confidence interval (:data:`CI_KEYS`) is an attribute of the record: bounds of the 95 % percentile
    bootstrap interval over ``ci_resamples`` resamples of ``ci_resampled``, or None with ``ci_note`` saying
    why there is none. Neither takes part in equality or :meth:`as_dict` (committed records stay as they are);
    :meth:`interval` gives the interval fields.

    ``settings`` are the task settings the value was computed under that are not defaults (``k``, ``search``,
    seeds …): with the method's identity they make a stored row's identity, so a run with other settings adds
    rows instead of replacing them. ``cost`` is what computing the method's vectors cost on the machine that
    computed them (:mod:`embedlab.evaluation.cost`), or None where nothing was measured. Both appear in
    :meth:`as_dict` only where they hold something."""

    method: str
    task: str
    dataset: str
    subset: str
    metric: str
    value: float
    n: int
    units: UnitScores | None = field(default=None, compare=False, repr=False, kw_only=True)
    ci_low: float | None = field(default=None, compare=False, kw_only=True)
    ci_high: float | None = field(default=None, compare=False, kw_only=True)
    ci_resamples: int | None = field(default=None, compare=False, kw_only=True)
    ci_resampled: str | None = field(default=None, compare=False, kw_only=True)
    ci_note: str | None = field(default=None, compare=False, kw_only=True)
    settings: dict[str, Any] = field(default_factory=dict, compare=False, kw_only=True)
    cost: dict[str, Any] | None = field(default=None, compare=False, kw_only=True)

    def as_dict(self) -> dict:
        """Every field but ``units``; the interval fields only where they hold something (so a record without
        an interval reads as it did before intervals existed)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "units" and not (f.name in (*CI_KEYS, "cost") and getattr(self, f.name) is None)
                and not (f.name == "settings" and not self.settings)}

    def interval(self) -> dict:
        """The confidence-interval fields (:data:`CI_KEYS`), None where there is no interval."""
        return {key: getattr(self, key) for key in CI_KEYS}

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None


def record_of_row(row: dict[str, Any]) -> Record:
    """The record of one stored row (a dict of the results database's columns, as ``ResultsDB.provenance``
    gives it): its key, value, interval fields, settings and cost (not its units)."""
    return Record(*(row[key] for key in RECORD_KEYS), **{key: row.get(key) for key in CI_KEYS},
                  settings=row.get("settings") or {}, cost=row.get("cost"))
