"""The plain result record every evaluator returns and the results database stores."""

from __future__ import annotations

from dataclasses import asdict, dataclass

RECORD_KEYS = ("method", "task", "dataset", "subset", "metric", "value", "n")


@dataclass(frozen=True)
class Record:
    """One measured number: ``value`` of ``metric`` for ``method`` on ``task``/``dataset``/``subset`` over ``n`` items."""

    method: str
    task: str
    dataset: str
    subset: str
    metric: str
    value: float
    n: int

    def as_dict(self) -> dict:
        return asdict(self)
