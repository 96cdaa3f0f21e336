"""A paper value beside its record: ours in the paper's unit, the difference, a status and its reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from embedlab.results.reproduce.plans import RecomputePlan, plan_for
from embedlab.results.reproduce.values import (PAPER_VALUES, RECORDS, PaperValue, StoredRecord, convert, paper_values,
                                               printed_decimals, read_records, tolerance_of)


@dataclass(frozen=True)
class Row:
    """One line of the report."""

    paper_value: PaperValue
    record: StoredRecord | None
    ours: float | None  # in the paper's unit
    difference: float | None
    status: str
    reason: str
    # whether the paper's value lies inside our 95 % interval (None: not a same-model cell, or no interval)
    paper_in_interval: bool | None = None


NO_INTERVAL = "no interval: recompute to get one"


def _interval(value: PaperValue, record: StoredRecord, status: str) -> tuple[bool | None, str]:
    """(whether the paper's value lies inside our 95 % interval, the sentence that says so) for a same-model
    cell; a cell within tolerance cites the interval, one outside says where the paper's value falls."""
    if status not in ("within tolerance", "outside tolerance", "exact"):
        return None, ""
    if not record.has_interval:
        return None, f"; {record.ci_note or NO_INTERVAL}" if status == "outside tolerance" else ""
    low, high = (convert(float(bound), record.unit, value.unit) for bound in (record.ci_low, record.ci_high))
    inside = low <= value.number <= high
    shown = f"our 95 % CI [{low:.{printed_decimals(value.value) + 1}f}, {high:.{printed_decimals(value.value) + 1}f}]"
    if status == "outside tolerance":
        return inside, f"; the paper's value lies {'inside' if inside else 'outside'} {shown}"
    return inside, f"; {shown}"


def compare(value: PaperValue, record: StoredRecord | None, plan: RecomputePlan | None = None) -> Row:
    """The report row: ours in the paper's unit, the difference, and a status with its one-sentence reason.

    A cell without a record that a recompute plan produces is "not run here" (reproducible, but not computed on
    the machines so far), with the plan's cost and the command that computes it; without a plan it is not
    reproducible here."""
    if record is None:
        if value.kind != "not-reproducible" and plan is not None:
            command = (f"embedlab reproduce --recompute --paper {value.paper}{' --expensive' if plan.expensive else ''} "
                       f"--method '{value.method}' --task {value.harness_task}")
            reason = f"no stored record yet: {plan.cost or 'cost not measured'} (`{command}`); {value.reason}"
            return Row(value, None, None, None, "not run here", reason)
        reason = value.reason if value.kind == "not-reproducible" else f"no stored record for {value.method}; {value.reason}"
        return Row(value, None, None, None, "not reproducible here", reason)
    ours = convert(float(record.value), record.unit, value.unit)
    difference = ours - value.number
    if value.kind == "same":
        exact_within = 0.5 * 10 ** -printed_decimals(value.value) + 1e-9  # rounds to the printed value
        if abs(difference) <= exact_within:
            status = "exact"
        elif abs(difference) <= (tolerance_of(value) or 0.0) + 1e-9:
            status = "within tolerance"
        else:
            status = "outside tolerance"
    else:
        status = {"protocol": "other protocol", "analogue": "analogue on another model",
                  "different-model": "different model", "not-reproducible": "not reproducible here"}[value.kind]
    inside, sentence = _interval(value, record, status)
    return Row(value, record, ours, difference, status, value.reason + sentence, inside)


def report_rows(paper: str, *, values_folder: Path = PAPER_VALUES, records_folder: Path = RECORDS) -> list[Row]:
    """Every paper value of ``paper`` beside its record."""
    stored = {record.key: record for record in read_records(paper, records_folder)}
    return [compare(value, stored.get(value.key), plan_for(value)) for value in paper_values(paper, values_folder)]
