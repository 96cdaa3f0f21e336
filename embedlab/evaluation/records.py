"""The plain result record every evaluator returns and the results database stores, and the per-unit
scores behind it (what a bootstrap resamples)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

RECORD_KEYS = ("method", "task", "dataset", "subset", "metric", "value", "n")


@dataclass(frozen=True, eq=False)
class UnitScores:
    """The independent units behind one record and how its value is computed from them.

    ``resampled`` names the unit (``pairs``, ``queries``, ``items``, ``anchors`` …); ``statistic`` says how
    the record's value follows from ``arrays`` (``mean`` of ``arrays["score"]``; ``spearman``/``pearson``/
    ``kendall_b``/``kendall_c`` of ``arrays["predicted"]`` against ``arrays["gold"]``); every array is 1-D
    with one entry per unit, so resampling units is indexing every array with the same index vector.
    """

    resampled: str
    statistic: str
    arrays: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        lengths = {name: np.shape(values) for name, values in self.arrays.items()}
        if len({shape for shape in lengths.values()}) > 1 or any(len(shape) != 1 for shape in lengths.values()):
            raise ValueError(f"per-unit arrays must be 1-D and of one length, got {lengths}")

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0


@dataclass(frozen=True)
class Record:
    """One measured number: ``value`` of ``metric`` for ``method`` on ``task``/``dataset``/``subset`` over ``n`` items.

    ``units``, when the task keeps them, are the per-unit scores ``value`` was computed from; they take no
    part in equality and are not part of :meth:`as_dict`."""

    method: str
    task: str
    dataset: str
    subset: str
    metric: str
    value: float
    n: int
    units: UnitScores | None = field(default=None, compare=False, repr=False, kw_only=True)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "units"}
