"""Paper values and committed records: their record types, the files they live in, and their units.

* ``resources/paper_values/<paper>.csv`` — every paper cell we reproduce or compare with, transcribed from
  the paper text as printed, with its unit (see *Units* below) and the record it is compared against (method, task, dataset,
  subset, metric), the kind of comparison (``same`` model and protocol, ``protocol`` variant, ``analogue``
  on another model, ``different-model``, ``not-reproducible``), a tolerance for ``same`` cells and the
  reason in one sentence. Paper numbers live only here, never in prose.
* ``resources/records/<paper>.jsonl`` — our numbers: one JSON object per line with the harness record
  (method, task, dataset, subset, metric, value, n) plus unit, code version, model fingerprint, provenance
  (recomputed by which command, or taken from which document without a re-run) and a protocol note.

Units: one vocabulary, the harness's (:data:`embedlab.evaluation.base.UNITS`, each metric's declared
``Metric.unit``). A paper that prints a share or a correlation times 100 ("46.5" for 0.465) is transcribed
as printed with the unit ``percent``; :data:`PRINTED_SCALES` is the one mapping from such a printed form to
its factor, used only to compare and display. Every other unit in the files is the metric's declared one.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from embedlab.errors import InputError
from embedlab.evaluation.records import CI_KEYS, Record

RESOURCES = Path(__file__).resolve().parents[2] / "resources"
PAPER_VALUES = RESOURCES / "paper_values"
RECORDS = RESOURCES / "records"

PAPERS: dict[str, str] = {
    "neural": "Neural Embeddings for Text (Vasilyev & Bohannon)",
    "pooling": "Extracting Sentence Embeddings from Pretrained Transformer Models",
    "matching": "Token-level matching for STS (Wang & Yu, 2023)",
    "alignsim": "ALIGN-SIM: a task-free test bed (Mahajan et al.)",
}
KINDS = ("same", "protocol", "analogue", "different-model", "not-reproducible")
STATUSES = ("exact", "within tolerance", "outside tolerance", "other protocol", "analogue on another model",
            "different model", "not run here", "not reproducible here")
RECORD_FIELDS = ("method", "task", "dataset", "subset", "metric", "value", "n", "unit", "code_version",
                 "fingerprint", "provenance", "protocol")


@dataclass(frozen=True)
class PaperValue:
    """One transcribed paper cell and the record of ours it is compared with."""

    paper: str
    table: str
    row: str
    column: str
    dataset: str
    model: str
    value: str  # as printed: its decimals say how exact the paper is
    unit: str  # the metric's declared unit, or a key of PRINTED_SCALES (that unit as the paper prints it)
    note: str
    method: str
    task: str
    our_dataset: str
    subset: str
    metric: str
    kind: str
    tolerance: str  # absolute in the paper's unit, or relative with a trailing %
    reason: str

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.method, self.task, self.our_dataset, self.subset, self.metric)

    @property
    def number(self) -> float:
        return float(self.value)

    @property
    def harness_task(self) -> str:
        """``family:dataset``, as plans and ``--task`` name the task behind this cell."""
        return f"{self.task}:{self.our_dataset}"


@dataclass(frozen=True)
class StoredRecord(Record):
    """A harness record with what a committed record must also say: unit, code, model, where it came from."""

    unit: str
    code_version: str
    fingerprint: str
    provenance: str
    protocol: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.method, self.task, self.dataset, self.subset, self.metric)

    @property
    def recomputed(self) -> bool:
        return self.provenance.startswith("recomputed")


# --- reading and writing ------------------------------------------------------------------------------------

def paper_values(paper: str, folder: Path = PAPER_VALUES) -> list[PaperValue]:
    """The transcribed cells of ``paper``; a malformed row names the file and line."""
    check_paper(paper)
    path = folder / f"{paper}.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        expected = [f.name for f in fields(PaperValue)]
        if reader.fieldnames != expected:
            raise InputError(f"{path}: header must be {','.join(expected)}")
        values = []
        for line, row in enumerate(reader, start=2):
            value = PaperValue(**row)
            problems = []
            if value.kind not in KINDS:
                problems.append(f"kind {value.kind!r}")
            unit_problem = _unit_problem(value.unit, value.task, value.metric)
            if unit_problem:
                problems.append(unit_problem)
            try:
                float(value.value)
                tolerance_of(value)
            except ValueError as error:
                problems.append(str(error))
            if value.paper != paper:
                problems.append(f"paper {value.paper!r}")
            if problems:
                raise InputError(f"{path}, line {line}: bad {', '.join(problems)}")
            values.append(value)
    return values


def read_records(paper: str, folder: Path = RECORDS) -> list[StoredRecord]:
    """The committed records of ``paper`` (none if the file does not exist yet)."""
    check_paper(paper)
    path = folder / f"{paper}.jsonl"
    if not path.exists():
        return []
    records = []
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
            missing = [name for name in RECORD_FIELDS if name not in data and name != "protocol"]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            record = StoredRecord(**{name: data[name] for name in (*RECORD_FIELDS, *CI_KEYS) if name in data})
            unit_problem = _unit_problem(record.unit, record.task, record.metric)
            if unit_problem or not math.isfinite(float(record.value)):
                raise ValueError(f"bad {unit_problem or f'value {record.value!r}'}")
        except (ValueError, TypeError) as error:
            raise InputError(f"{path}, line {line}: {error}") from None
        records.append(record)
    return records


def write_records(paper: str, records: Iterable[StoredRecord], folder: Path = RECORDS) -> Path:
    """Write ``paper``'s records sorted by key, one JSON object per line, so a rerun diffs only where numbers moved."""
    from embedlab.runtime.cache.atomic import atomic_write_bytes

    check_paper(paper)
    unique = {record.key: record for record in records}
    lines = [json.dumps(unique[key].as_dict(), ensure_ascii=False) for key in sorted(unique)]
    path = folder / f"{paper}.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def check_paper(paper: str) -> None:
    if paper not in PAPERS:
        raise InputError(f"unknown paper {paper!r}; choose from {', '.join(PAPERS)}")


# --- units --------------------------------------------------------------------------------------------------

# How papers print some numbers: a share or a correlation times 100 ("46.5" for an accuracy of 0.465, "63.7"
# for a Spearman ρ of 0.637). A printed form, not a unit of its own: "percent" is the metric's unit × 100.
PRINTED_SCALES: dict[str, float] = {"percent": 100.0}
SCALED_UNITS = frozenset({"fraction", "correlation"})  # the units a paper may print scaled


def unit_of(task: str, metric: str) -> str:
    """The unit of a harness metric: its task's declaration (a key of :data:`~embedlab.evaluation.base.UNITS`).
    A name that carries its ε grid after ``@`` (Table 3's fitted grid) has its base metric's unit."""
    from embedlab.evaluation.harness import metric_of  # the task table: every task's libraries, needed only here

    return metric_of(task, metric.split("@")[0]).unit


def _unit_problem(unit: str, task: str, metric: str) -> str | None:
    """Why ``unit`` cannot label a number of ``task``'s ``metric`` in a committed file (None if it can)."""
    declared = unit_of(task, metric)
    if unit == declared or (unit in PRINTED_SCALES and declared in SCALED_UNITS):
        return None
    printed = f" or {' or '.join(PRINTED_SCALES)}" if declared in SCALED_UNITS else ""
    return f"unit {unit!r} ({task} {metric} is declared {declared!r}{printed})"


def convert(value: float, unit: str, to_unit: str) -> float:
    """``value`` from ``unit`` into ``to_unit``: the same unit, or a scaled unit to or from how a paper prints
    it (:data:`PRINTED_SCALES`); anything else (a count as a percentage) is refused."""
    if unit == to_unit:
        return value
    if to_unit in PRINTED_SCALES and unit in SCALED_UNITS:
        return value * PRINTED_SCALES[to_unit]
    if unit in PRINTED_SCALES and to_unit in SCALED_UNITS:
        return value / PRINTED_SCALES[unit]
    raise InputError(f"cannot convert {unit} to {to_unit}")


def printed_decimals(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


def tolerance_of(value: PaperValue) -> float | None:
    """Allowed |ours − paper| in the paper's unit, or None (no tolerance: not a same-model cell)."""
    text = value.tolerance.strip()
    if not text:
        if value.kind == "same":
            raise InputError("tolerance (a same-model cell needs one)")
        return None
    if text.endswith("%"):
        return abs(value.number) * float(text[:-1]) / 100
    return float(text)


def stored_from(record: Record, *, fingerprint: str, code_version: str, provenance: str, protocol: str = "") -> StoredRecord:
    """A harness record as a committed record."""
    return StoredRecord(record.method, record.task, record.dataset, record.subset, record.metric, float(record.value),
                        int(record.n), unit_of(record.task, record.metric), code_version,
                        fingerprint, provenance, protocol, **record.interval())


def needed_keys(paper: str) -> set[tuple[str, str, str, str, str]]:
    """The record keys the paper values ask for (a recompute keeps only these, so the files stay small)."""
    return {value.key for value in paper_values(paper)}
