"""The papers beside our numbers: paper values as data, stored records, one comparison report.

Three inputs, all committed in the package so a fresh clone renders the report at once:

* ``resources/paper_values/<paper>.csv`` — every paper cell we reproduce or compare with, transcribed from
  the paper text as printed, with its unit (see *Units* below) and the record it is compared against (method, task, dataset,
  subset, metric), the kind of comparison (``same`` model and protocol, ``protocol`` variant, ``analogue``
  on another model, ``different-model``, ``not-reproducible``), a tolerance for ``same`` cells and the
  reason in one sentence. Paper numbers live only here, never in prose.
* ``resources/records/<paper>.jsonl`` — our numbers: one JSON object per line with the harness record
  (method, task, dataset, subset, metric, value, n) plus unit, code version, model fingerprint, provenance
  (recomputed by which command, or taken from which document without a re-run) and a protocol note.
* :data:`RECOMPUTE_PLANS` — which (method spec, tasks) regenerate a paper's records through the harness,
  and which of them are too expensive to run by default (hours of neural micro-tuning).

:func:`compare` turns a paper value and its record into a :class:`Row` with a status; :func:`render_markdown`
and :func:`render_html` write the report (the HTML is one offline file, no script or network).

Units: one vocabulary, the harness's (:data:`embedlab.evaluation.base.UNITS`, each metric's declared
``Metric.unit``). A paper that prints a share or a correlation times 100 ("46.5" for 0.465) is transcribed
as printed with the unit ``percent``; :data:`PRINTED_SCALES` is the one mapping from such a printed form to
its factor, used only to compare and display. Every other unit in the files is the metric's declared one.
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from embedlab.evaluation.records import Record

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
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


@dataclass(frozen=True)
class Row:
    """One line of the report."""

    paper_value: PaperValue
    record: StoredRecord | None
    ours: float | None  # in the paper's unit
    difference: float | None
    status: str
    reason: str


@dataclass
class RecomputePlan:
    """Method specs and the tasks that regenerate a paper's records; ``expensive`` ones only on request."""

    specs: tuple[str, ...]
    tasks: str
    expensive: bool = False
    cost: str = ""
    intersections_with: str | None = None  # Eq. 3: reference method (run first) for triplet intersections
    protocol: str = ""
    task_options: tuple[tuple[str, object], ...] = ()  # keyword options for parse_tasks (e.g. ALIGN-SIM's perturbation)
    subset_suffix: str = ""  # appended to the stored records' subsets, so a variant's records get keys of their own
    epsilon_search: bool = False  # ALIGN-SIM: also fit Table 3's ε grid to the paper (alignsim_epsilon_records)


# --- reading and writing ------------------------------------------------------------------------------------

def paper_values(paper: str, folder: Path = PAPER_VALUES) -> list[PaperValue]:
    """The transcribed cells of ``paper``; a malformed row names the file and line."""
    _check_paper(paper)
    path = folder / f"{paper}.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        expected = [f.name for f in fields(PaperValue)]
        if reader.fieldnames != expected:
            raise ValueError(f"{path}: header must be {','.join(expected)}")
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
                _tolerance(value)
            except ValueError as error:
                problems.append(str(error))
            if value.paper != paper:
                problems.append(f"paper {value.paper!r}")
            if problems:
                raise ValueError(f"{path}, line {line}: bad {', '.join(problems)}")
            values.append(value)
    return values


def read_records(paper: str, folder: Path = RECORDS) -> list[StoredRecord]:
    """The committed records of ``paper`` (none if the file does not exist yet)."""
    _check_paper(paper)
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
            record = StoredRecord(**{name: data[name] for name in RECORD_FIELDS if name in data})
            unit_problem = _unit_problem(record.unit, record.task, record.metric)
            if unit_problem or not math.isfinite(float(record.value)):
                raise ValueError(f"bad {unit_problem or f'value {record.value!r}'}")
        except (ValueError, TypeError) as error:
            raise ValueError(f"{path}, line {line}: {error}") from None
        records.append(record)
    return records


def write_records(paper: str, records: Iterable[StoredRecord], folder: Path = RECORDS) -> Path:
    """Write ``paper``'s records sorted by key, one JSON object per line, so a rerun diffs only where numbers moved."""
    from embedlab.runtime import atomic_write_bytes

    _check_paper(paper)
    unique = {record.key: record for record in records}
    lines = [json.dumps(asdict(unique[key]), ensure_ascii=False) for key in sorted(unique)]
    path = folder / f"{paper}.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def _check_paper(paper: str) -> None:
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; choose from {', '.join(PAPERS)}")


# --- units and comparison -------------------------------------------------------------------------------------

# How papers print some numbers: a share or a correlation times 100 ("46.5" for an accuracy of 0.465, "63.7"
# for a Spearman ρ of 0.637). A printed form, not a unit of its own: "percent" is the metric's unit × 100.
PRINTED_SCALES: dict[str, float] = {"percent": 100.0}
SCALED_UNITS = frozenset({"fraction", "correlation"})  # the units a paper may print scaled


def unit_of(task: str, metric: str) -> str:
    """The unit of a harness metric: its task's declaration (a key of :data:`~embedlab.evaluation.base.UNITS`).
    A name that carries its ε grid after ``@`` (Table 3's fitted grid) has its base metric's unit."""
    from embedlab.evaluation import metric_of  # the task table: every task's libraries, needed only here

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
    raise ValueError(f"cannot convert {unit} to {to_unit}")


def _decimals(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


def _tolerance(value: PaperValue) -> float | None:
    """Allowed |ours − paper| in the paper's unit, or None (no tolerance: not a same-model cell)."""
    text = value.tolerance.strip()
    if not text:
        if value.kind == "same":
            raise ValueError("tolerance (a same-model cell needs one)")
        return None
    if text.endswith("%"):
        return abs(value.number) * float(text[:-1]) / 100
    return float(text)


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
        exact_within = 0.5 * 10 ** -_decimals(value.value) + 1e-9  # rounds to the printed value
        if abs(difference) <= exact_within:
            status = "exact"
        elif abs(difference) <= (_tolerance(value) or 0.0) + 1e-9:
            status = "within tolerance"
        else:
            status = "outside tolerance"
    else:
        status = {"protocol": "other protocol", "analogue": "analogue on another model",
                  "different-model": "different model", "not-reproducible": "not reproducible here"}[value.kind]
    return Row(value, record, ours, difference, status, value.reason)


def plan_for(value: PaperValue) -> RecomputePlan | None:
    """The recompute plan that produces ``value``'s record (its method on its task, its variant's subset), if any."""
    intersection = value.subset.startswith("vs ")  # Eq. 3 records: subset "vs <reference method>"
    # a variant's plan (its own subset suffix) before the default plans, whose empty suffix matches every subset
    for plan in sorted(RECOMPUTE_PLANS.get(value.paper, ()), key=lambda plan: -len(plan.subset_suffix)):
        runs_it = (value.method in plan.specs and value.harness_task in plan.tasks.split(",")
                   and value.subset.endswith(plan.subset_suffix) and _scores_criterion(plan, value))
        if runs_it and (not intersection or value.subset == f"vs {plan.intersections_with}"):
            return plan
    return None


def _scores_criterion(plan: RecomputePlan, value: PaperValue) -> bool:
    """Whether ``plan`` produces ``value``'s ALIGN-SIM criterion (subset ``c2/n=1`` is criterion 2): a plan that
    asks for some criteria only (task option ``criteria``) does not produce the others' records."""
    criteria = dict(plan.task_options).get("criteria")
    if value.task != "alignsim" or criteria is None or not value.subset.startswith("c"):
        return True
    return int(value.subset[1]) in criteria


def report_rows(paper: str, *, values_folder: Path = PAPER_VALUES, records_folder: Path = RECORDS) -> list[Row]:
    """Every paper value of ``paper`` beside its record."""
    stored = {record.key: record for record in read_records(paper, records_folder)}
    return [compare(value, stored.get(value.key), plan_for(value)) for value in paper_values(paper, values_folder)]


# --- rendering -------------------------------------------------------------------------------------------------

def format_number(value: float | None, unit: str, like: str = "") -> str:
    """A cell: counts with thousands separators, other values with the paper's decimals (+1 to show gaps)."""
    if value is None:
        return "–"
    if unit == "count":
        return f"{value:,.0f}"
    decimals = max(_decimals(like) + 1, 2) if like else 4
    return f"{value:.{decimals}f}"


def _difference(row: Row) -> str:
    if row.difference is None:
        return "–"
    unit, decimals = row.paper_value.unit, _decimals(row.paper_value.value) + 1
    if unit == "count":
        relative = f" ({row.difference / row.paper_value.number:+.1%})" if row.paper_value.number else ""
        return f"{row.difference:+,.0f}{relative}"
    return f"{row.difference:+.{max(decimals, 2)}f}"


def _source(row: Row) -> str:
    if row.record is None:
        return "–"
    return "recomputed" if row.record.recomputed else "earlier run, not re-run"


HEADER = ("table", "row", "column", "dataset", "paper", "ours", "difference", "status", "ours: method", "source", "reason")


def _cells(row: Row) -> list[str]:
    value = row.paper_value
    return [value.table, value.row, value.column, value.dataset, value.value,
            format_number(row.ours, value.unit, value.value), _difference(row), row.status, value.method, _source(row),
            row.reason + (f" ({value.note})" if value.note else "")]


def status_counts(rows: Sequence[Row]) -> dict[str, int]:
    counts = {status: 0 for status in STATUSES}
    for row in rows:
        counts[row.status] += 1
    return {status: count for status, count in counts.items() if count}


def provenance_lines(records: Sequence[StoredRecord]) -> list[str]:
    """One line per distinct provenance: how many records came from where."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.provenance] = counts.get(record.provenance, 0) + 1
    return [f"{count} records: {provenance}" for provenance, count in counts.items()]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(sections: dict[str, list[Row]], records: dict[str, list[StoredRecord]], *, command: str) -> str:
    """The report as one markdown page: a summary, then one table per paper."""
    lines = ["# embedlab reproduce: the papers beside our numbers", "",
             f"Rendered by `{command}` from the committed paper values (`embedlab/resources/paper_values/`) and "
             "records (`embedlab/resources/records/`). Paper values are as printed, in the paper's unit; ours are "
             "converted to it. Statuses: exact (rounds to the printed value), within / outside tolerance (same "
             "model and protocol), other protocol, analogue on another model, different model, not run here (reproducible, "
             "not computed yet: the reason gives its cost and command), not reproducible here.",
             "", "| paper | cells | " + " | ".join(STATUSES) + " |", "|---|---:|" + "---:|" * len(STATUSES)]
    for paper, rows in sections.items():
        counts = status_counts(rows)
        lines.append(f"| {paper} | {len(rows)} | " + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |")
    for paper, rows in sections.items():
        lines += ["", f"## {paper}: {PAPERS[paper]}", ""]
        lines += [f"* {line}" for line in provenance_lines(records[paper])] + [""]
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + "|".join("---:" if name in ("paper", "ours", "difference") else "---" for name in HEADER) + "|")
        lines += ["| " + " | ".join(_md_escape(cell) for cell in _cells(row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_STYLE = """body { font-family: sans-serif; margin: 2em; } table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; } th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.exact td.status { background: #dff0d8; } tr.within-tolerance td.status { background: #eaf5e0; }
tr.outside-tolerance td.status { background: #f8d7da; } tr.not-reproducible-here td.status { background: #eee; }
tr.not-run-here td.status { background: #e2e8f5; }
tr.different-model td.status, tr.other-protocol td.status { background: #fff3cd; } .meta { color: #666; }"""


def render_html(sections: dict[str, list[Row]], records: dict[str, list[StoredRecord]], *, command: str) -> str:
    """The same report as one self-contained HTML file (no script, no network)."""
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>embedlab reproduce</title>",
             f"<style>{_STYLE}</style></head><body><h1>embedlab reproduce: the papers beside our numbers</h1>",
             f"<p class='meta'>Rendered by <code>{html.escape(command)}</code> from the committed paper values and records "
             "(no date, so that a re-render differs only where a number or a status does). Paper values as printed, "
             "in the paper's unit; ours converted to it.</p>",
             "<table><tr><th>paper</th><th>cells</th>" + "".join(f"<th>{html.escape(s)}</th>" for s in STATUSES) + "</tr>"]
    for paper, rows in sections.items():
        counts = status_counts(rows)
        parts.append(f"<tr><td>{paper}</td><td class='num'>{len(rows)}</td>"
                     + "".join(f"<td class='num'>{counts.get(s, 0)}</td>" for s in STATUSES) + "</tr>")
    parts.append("</table>")
    numeric = {"paper", "ours", "difference"}
    for paper, rows in sections.items():
        parts.append(f"<h2>{paper}: {html.escape(PAPERS[paper])}</h2><ul>")
        parts += [f"<li>{html.escape(line)}</li>" for line in provenance_lines(records[paper])]
        parts.append("</ul><table><tr>" + "".join(f"<th>{html.escape(name)}</th>" for name in HEADER) + "</tr>")
        for row in rows:
            css = row.status.replace(" ", "-")
            cells = "".join(f"<td class='{'num' if name in numeric else ('status' if name == 'status' else '')}'>{html.escape(cell)}</td>"
                            for name, cell in zip(HEADER, _cells(row)))
            parts.append(f"<tr class='{css}'>{cells}</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(papers: Sequence[str], out: Path, *, command: str, values_folder: Path = PAPER_VALUES,
                 records_folder: Path = RECORDS) -> tuple[Path, Path]:
    """Render ``papers`` from their values and records into ``out``/report.md and ``out``/report.html."""
    from embedlab.runtime import atomic_write_bytes

    sections = {paper: report_rows(paper, values_folder=values_folder, records_folder=records_folder) for paper in papers}
    records = {paper: read_records(paper, records_folder) for paper in papers}
    out.mkdir(parents=True, exist_ok=True)
    markdown, page = out / "report.md", out / "report.html"
    atomic_write_bytes(markdown, render_markdown(sections, records, command=command).encode("utf-8"))
    atomic_write_bytes(page, render_html(sections, records, command=command).encode("utf-8"))
    return markdown, page


# --- recomputing --------------------------------------------------------------------------------------------------

_PAIRWISE_TASKS = "triplets:sts,triplets:mrpc,triplets:summ-r,triplets:text-summ-r,triplets:summ-g,triplets:text-summ-g"
_SUMMEVAL_256 = "truncate=256: each input cut to its first 256 tokens, sentence-transformers' max_seq_length (SummEval articles are cut)"
_ST_PIPELINE = "sentence-transformers pipeline: inputs cut at 256 tokens (SummEval articles are cut)"
_SUMMEVAL_WHOLE = "embedlab pooling: long texts chunked by sentences, every token pooled (SummEval articles whole)"
_MPNET_PIPELINE = "sentence-transformers pipeline: inputs cut at 384 tokens, all-mpnet-base-v2's max_seq_length (SummEval articles are cut)"
_MPNET_384 = "truncate=384: each input cut to its first 384 tokens, all-mpnet-base-v2's max_seq_length (SummEval articles are cut)"
_UNNORMALISED = "Appendix F: product=dot, the embeddings' dot product as encoded (no float64 re-normalisation)"
_NEEDS_MPNET = "needs the all-mpnet-base-v2 package parts (README, models table)"
_CANDIDATES = "neural:minilm,softmax=candidates"  # K = 256: ≈ 4× cheaper than exact, cosine to exact ≥ 0.995
_NEURAL_TASKS = "correlations:stsb,triplets:sts,pairs:sts,triplets:mrpc,pairs:mrpc,correlations:summeval"
_APPENDIX_G = ("neural:minilm,params=block,epochs=5", "neural:minilm,params=block,epochs=5,variant=cls",
               "neural:minilm,params=block,epochs=5,variant=avg", "neural:minilm,params=block,epochs=5,variant=cls-tuned",
               "neural:minilm,params=block,epochs=5,variant=avg-tuned", "neural:minilm,params=block,epochs=5,variant=cls-diff",
               "neural:minilm,params=block,epochs=5,variant=avg-diff", "neural:minilm,params=block-dense-bias,epochs=5")
_RE_SPECS = ("random:minilm,dim=768", "random:minilm,dim=768,post=zscore", "random:minilm,dim=768,post=whiten@ref",
             "random:minilm,dim=768,weights=idf-ref", "random:minilm,dim=768,weights=idf-target,post=quantile-u")
_MINILM_POOLED = ("minilm:layers=1+last", "minilm:weights=idf-ref", "minilm:weights=idf-ref,post=zscore",
                  "minilm:weights=idf-target", "minilm:weights=idf-target,post=quantile-u",
                  "minilm:layers=1+last,filter=biases,post=normalize")
_STS_ALL = "sts:sts12,sts:sts13,sts:sts14,sts:sts15,sts:sts16,sts:stsb,sts:sick-r"

_ALIGNSIM_PARAPHRASE = "alignsim:qqp,alignsim:paws,alignsim:mrpc"
_ALIGNSIM_C1 = "criterion 1 (and α) at 2,500 pairs per label (MRPC: all 2,474 / 1,194); seed 0"
_SENTEVAL = ("classification:mr,classification:cr,classification:subj,classification:mpqa,classification:sst2,"
             "classification:trec,classification:mrpc")
_SMOLLM2 = "smollm2: the mean of SmolLM2-135M-Instruct's last hidden layer (the paper's LLM protocol, Appendix A)"
_SMOLLM2_RATE = "SmolLM2 encodes ≈ 18 STS-B sentences a second on one quiet core (one torch thread)"
_SMOLLM2_COST_C1 = ("≈ 24,000 texts, ≈ 25 min of one quiet core (" + _SMOLLM2_RATE + "); measured: QQP's 5,000 pairs took "
                    "21 min of wall time and ≈ 7 min of CPU, MRPC's 3,668 pairs 22 min and ≈ 8 min, at one thread on the "
                    "shared 2-core machine (load 7–40)")
_SMOLLM2_COST_C4 = ("AFIN's ≈ 6,000 texts after the criterion-1 run above (α needs its random pairs, which it then reuses "
                    "from the cache): 5 min measured on the quiet 2-core machine; without it, ≈ 30 min")
_SMOLLM2_COST_C2 = ("≈ 44,000 texts (criterion 2 at 3,500 sentences per dataset beside criterion 1's): ≈ 45 min of one quiet "
                    "core, ≈ 20 min of it the synonym-replaced sentences")
_SMOLLM2_COST_SENTEVAL = ("≈ 122,000 texts (SST-2's 70,000 phrases, MR, SUBJ, MPQA ≈ 10,600 each, MRPC ≈ 10,900, TREC 5,952, "
                          "CR 3,775): ≈ 2 h of one quiet core to encode, then the nested cross-validation (≈ 10 min)")

RECOMPUTE_PLANS: dict[str, tuple[RecomputePlan, ...]] = {
    "neural": (
        RecomputePlan(("st:minilm",), "correlations:stsb,pairs:sts,pairs:mrpc," + _PAIRWISE_TASKS,
                      cost="≈ 10 min on 2 CPU cores", protocol=_ST_PIPELINE),
        RecomputePlan(("minilm:truncate=256",), "correlations:summeval", cost="≈ 2 min", protocol=_SUMMEVAL_256),
        RecomputePlan(("minilm",), "correlations:summeval", cost="≈ 2 min", protocol=_SUMMEVAL_WHOLE),
        RecomputePlan(("st:minilm",), "triplets:sts", intersections_with=_CANDIDATES,
                      cost="≈ 2 min: 643 sentences micro-tuned with the candidate-set softmax", protocol="Eq. 3 against " + _CANDIDATES),
        RecomputePlan((_CANDIDATES + "+minilm",), "triplets:sts,pairs:sts,correlations:stsb", intersections_with=_CANDIDATES,
                      cost="≈ 5 min: STS-B test micro-tuned with the candidate-set softmax", protocol="Appendix H analogue: neural + pooled MiniLM"),
        RecomputePlan((_CANDIDATES + "+mpnet",), "triplets:sts,pairs:sts,correlations:stsb", intersections_with=_CANDIDATES, expensive=True,
                      cost="≈ 8 min: STS-B test micro-tuned with the candidate-set softmax, and all-mpnet-base-v2; " + _NEEDS_MPNET,
                      protocol="Appendix H analogue: neural + pooled all-mpnet-base-v2"),
        RecomputePlan(("st:minilm",), "triplets:summ-r,triplets:text-summ-r,triplets:summ-g,triplets:text-summ-g", expensive=True,
                      intersections_with=_CANDIDATES,
                      cost="micro-tunes SummEval's 2,746 distinct texts with the candidate-set softmax, one thread on 2 loaded cores: "
                           "the 1,100 references ≈ 37 min, the 100 articles ≈ 48 min, the 1,546 generated summaries ≈ 40 min "
                           "(--task triplets:summ-r etc. runs one set)",
                      protocol="Eq. 3 against " + _CANDIDATES),
        RecomputePlan(("st:minilm", "minilm"), "triplets:sts,pairs:mrpc,correlations:stsb", task_options=(("product", "dot"),),
                      cost="≈ 3 min", protocol=_UNNORMALISED),
        RecomputePlan(("st:mpnet",), "correlations:stsb,pairs:sts,pairs:mrpc," + _PAIRWISE_TASKS, expensive=True,
                      cost="31 min measured on the 2-core machine while other jobs ran: all-mpnet-base-v2 encodes ≈ 13,000 texts; " + _NEEDS_MPNET, protocol=_MPNET_PIPELINE),
        RecomputePlan(("st:mpnet",), "triplets:sts", expensive=True, intersections_with=_CANDIDATES,
                      cost="≈ 3 min: 643 sentences micro-tuned with the candidate-set softmax; " + _NEEDS_MPNET,
                      protocol="Eq. 3 against " + _CANDIDATES),
        RecomputePlan(("st:mpnet",), "triplets:mrpc,triplets:summ-r,triplets:text-summ-r,triplets:summ-g,triplets:text-summ-g",
                      expensive=True, intersections_with=_CANDIDATES,
                      cost="MiniLM's candidate-softmax neural embedding of MRPC's 4,812 distinct sentences (14 min measured, with "
                           "the MRPC run) and SummEval's 2,746 texts (the "
                           "SummEval sets: see the st:minilm plan above; once they are cached, all-mpnet-base-v2 took 2.5 min for "
                           "summ-g and 3.5 min for text-summ-g); " + _NEEDS_MPNET,
                      protocol="Eq. 3 against " + _CANDIDATES),
        RecomputePlan(("mpnet:truncate=384",), "correlations:summeval", expensive=True, cost="≈ 5 min; " + _NEEDS_MPNET,
                      protocol=_MPNET_384),
        RecomputePlan(("mpnet",), "correlations:summeval", expensive=True, cost="≈ 8 min; " + _NEEDS_MPNET, protocol=_SUMMEVAL_WHOLE),
        RecomputePlan(("st:mpnet", "mpnet"), "triplets:sts,triplets:mrpc,correlations:stsb", task_options=(("product", "dot"),),
                      expensive=True, cost="≈ 10 min; " + _NEEDS_MPNET, protocol=_UNNORMALISED),
        RecomputePlan(("neural:minilm",), _NEURAL_TASKS + ",triplets:summ-r,triplets:text-summ-r,triplets:summ-g,triplets:text-summ-g",
                      expensive=True, cost="≈ 3 h per 10-epoch spec, 0.026–0.031 s a token on the 2-core machines (docs/neural.md): the STS-B "
                           "test's 2,552 texts 16 min, MRPC train's 7,052 texts (191,087 tokens) 97 min measured, "
                           "SummEval's 2,746 texts (214,642 tokens) ≈ 1.7 h (its last 2,234 texts 68 min measured, peak 1.4 GB)"),
        RecomputePlan(_APPENDIX_G, _NEURAL_TASKS, expensive=True, cost="≈ 1.6 h per 5-epoch run; the seven block rows share one run"),
    ),
    "pooling": (
        RecomputePlan(_RE_SPECS, _STS_ALL + ",clustering:agnews,clustering:tweet",
                      cost="≈ 10 min (no transformer runs; k-means dominates)", protocol="random token vectors, 768 wide, seed 0"),
        RecomputePlan(_RE_SPECS, "clustering:googlenews_ts,clustering:biomedical,clustering:searchsnippets,clustering:stackoverflow",
                      expensive=True, cost="≈ 1 h of k-means on 11,000–20,000 texts (googleTS has 152 clusters)",
                      protocol="random token vectors, 768 wide, seed 0"),
        RecomputePlan(_MINILM_POOLED, "sts:stsb,sts:sick-r,clustering:tweet,clustering:agnews",
                      cost="≈ 5 min with cached token states"),
    ),
    "matching": (
        RecomputePlan(("minilm:pool=cls", "match:minilm", "match:minilm,score=max", "match:minilm,score=max-2nd",
                       "match:minilm,weights=idf", "match:minilm,weights=none", "match:minilm,mode=bertscore"), _STS_ALL,
                      cost="≈ 10 min with cached token states (the encoder runs once per text)"),
        RecomputePlan(("match:mpnet", "match:mpnet,score=max", "match:mpnet,score=max-2nd", "match:mpnet,weights=idf",
                       "match:mpnet,weights=none", "match:mpnet,mode=bertscore"), _STS_ALL, expensive=True,
                      cost="7.6 min measured on the 2-core machine (all-mpnet-base-v2's token states of STS12–16 and SICK-R, STS-B's cached; peak 2.8 GB)"),
    ),
    "alignsim": (
        RecomputePlan(("st:minilm",), _ALIGNSIM_PARAPHRASE, task_options=(("criteria", (1,)),), epsilon_search=True,
                      cost="≈ 6 min on one core: 24,000 texts", protocol=_ALIGNSIM_C1),
        RecomputePlan(("st:minilm",), "classification:mr,classification:cr,classification:subj,classification:mpqa,"
                      "classification:sst2,classification:trec,classification:mrpc", expensive=True,
                      cost="9.6 min measured on the 2-core machine (nested 10 × 10-fold cross-validation)", protocol="SentEval protocol, scikit-learn logistic regression"),
        RecomputePlan(("st:mpnet",), "classification:mr,classification:cr,classification:trec", expensive=True,
                      cost="47 min measured on the shared 2-core machine (all-mpnet-base-v2 encodes 20,000 texts, then nested cross-validation)",
                      protocol="SentEval protocol, scikit-learn logistic regression"),
        RecomputePlan(("st:minilm",), _ALIGNSIM_PARAPHRASE, expensive=True, task_options=(("criteria", (1, 2)),),
                      epsilon_search=True, cost="44,000 texts (criterion 2 at the paper's 3,500 per dataset): 23 min measured on the shared 2-core machine",
                      protocol=_ALIGNSIM_C1 + "; criterion 2 at 3,500 sentences per dataset, perturbation=ours"),
        RecomputePlan(("st:minilm",), _ALIGNSIM_PARAPHRASE, expensive=True, subset_suffix=",perturbation=authors",
                      task_options=(("criteria", (2,)), ("perturbation", "authors")),
                      cost="57,000 texts (criterion 2 at 3,500 per dataset, and criterion 1 for α): 26 min measured on the shared 2-core machine",
                      protocol=_ALIGNSIM_C1 + "; criterion 2 at 3,500 sentences per dataset, perturbation=authors (the authors' "
                                              "released code: any non-stop-word, all senses, uninflected, every occurrence)"),
        # the paper's LLM rows, as an analogue on SmolLM2-135M-Instruct (costs: one torch thread, see _SMOLLM2_RATE)
        RecomputePlan(("smollm2",), _ALIGNSIM_PARAPHRASE, expensive=True, task_options=(("criteria", (1,)),),
                      cost=_SMOLLM2_COST_C1, protocol=_ALIGNSIM_C1 + "; " + _SMOLLM2),
        RecomputePlan(("smollm2",), "alignsim:afin", expensive=True, task_options=(("criteria", (4,)),),
                      cost=_SMOLLM2_COST_C4, protocol="criterion 4 on all 3,001 AFIN pairs, α from criterion 1's random pairs; seed 0; " + _SMOLLM2),
        RecomputePlan(("smollm2",), _ALIGNSIM_PARAPHRASE, expensive=True, task_options=(("criteria", (1, 2)),),
                      cost=_SMOLLM2_COST_C2, protocol=_ALIGNSIM_C1 + "; criterion 2 at 3,500 sentences per dataset, perturbation=ours; " + _SMOLLM2),
        RecomputePlan(("smollm2",), _SENTEVAL, expensive=True, cost=_SMOLLM2_COST_SENTEVAL,
                      protocol="SentEval protocol, scikit-learn logistic regression; " + _SMOLLM2),
    ),
}


EPSILON_STEP = 0.05  # Table 3's grid search: grids {0, 0.05, …, E}, E ≤ 0.9
EPSILON_LARGEST = 0.9


def alignsim_epsilon_records(methods: Sequence, tasks: Sequence, fingerprints: dict[str, str], *, version: str,
                             provenance: str) -> list[StoredRecord]:
    """Table 3 with the ε grid fitted: per method and metric (similarity, NED), the grid {0, 0.05, …, E} whose
    averaged criterion-1 pass rates come closest to the paper's Table 3 cells of the same record key (one E for
    the three datasets), from the per-item margins the tasks stored. The metric name carries the grid
    (``sim_pass_avg@0-0.60/0.05``), so the paper values name the grid they are compared with."""
    from embedlab.evaluation.alignsim.metrics import fit_epsilon_grid

    targets: dict[tuple[str, str], dict[str, float]] = {}
    for value in paper_values("alignsim"):
        if value.task == "alignsim" and value.subset == "c1" and value.metric in ("sim_pass_avg", "ned_pass_avg"):
            targets.setdefault((value.method, value.metric), {})[value.our_dataset] = convert(value.number, value.unit, "fraction")
    records = []
    for method in methods:
        margins: dict[str, dict] = {}  # metric (sim, ned) -> dataset -> per-item margins
        for task in tasks:
            if task.name != "alignsim":
                continue
            for (dataset, subset, metric), array in task.margins(method).items():
                if subset == "c1":
                    margins.setdefault(metric, {})[dataset] = array
        for (spec, metric), wanted in sorted(targets.items()):
            kind = metric.split("_")[0]
            if spec != method.spec or not set(wanted) <= set(margins.get(kind, {})):
                continue
            end, averages = fit_epsilon_grid(margins[kind], wanted, step=EPSILON_STEP, largest=EPSILON_LARGEST)
            name = f"{metric}@0-{end:.2f}/{EPSILON_STEP:g}"
            protocol = (f"ε grid {{0, {EPSILON_STEP:g}, …, {end:.2f}}}: of the grids {{0, {EPSILON_STEP:g}, …, E}}, E ≤ {EPSILON_LARGEST:g}, "
                        "the one whose averages come closest (least squares) to the paper's three datasets jointly")
            for dataset, average in sorted(averages.items()):
                count = len(margins[kind][dataset])
                records.append(StoredRecord(spec, "alignsim", dataset, "c1", name, average, count, "fraction", version,
                                            fingerprints.get(spec, ""), provenance, protocol))
    return records


def plans(paper: str, *, expensive: bool = False, methods: Sequence[str] = (),
          tasks: Sequence[str] = ()) -> tuple[list[RecomputePlan], list[RecomputePlan]]:
    """(plans to run, plans skipped as too expensive) for ``paper``; ``methods`` keeps only the plans that
    name one of these specs, ``tasks`` only those that run one of these ``family:dataset`` tasks (a subset
    of a long recompute, e.g. one Appendix G row, or one dataset's Eq. 3 intersections)."""
    _check_paper(paper)
    wanted = [plan for plan in RECOMPUTE_PLANS[paper] if (not methods or set(methods) & set(plan.specs))
              and (not tasks or set(tasks) & set(plan.tasks.split(",")))]
    chosen = [plan for plan in wanted if expensive or not plan.expensive]
    skipped = [plan for plan in wanted if plan not in chosen]
    if methods or tasks:  # run only the asked-for specs and tasks of the chosen plans
        chosen = [replace(plan, specs=tuple(spec for spec in plan.specs if not methods or spec in methods),
                          tasks=",".join(task for task in plan.tasks.split(",") if not tasks or task in tasks)) for plan in chosen]
    return chosen, skipped


def stored_from(record: Record, *, fingerprint: str, code_version: str, provenance: str, protocol: str = "") -> StoredRecord:
    """A harness record as a committed record."""
    return StoredRecord(record.method, record.task, record.dataset, record.subset, record.metric, float(record.value),
                        int(record.n), unit_of(record.task, record.metric), code_version,
                        fingerprint, provenance, protocol)


def needed_keys(paper: str) -> set[tuple[str, str, str, str, str]]:
    """The record keys the paper values ask for (a recompute keeps only these, so the files stay small)."""
    return {value.key for value in paper_values(paper)}


def recompute(paper: str, *, expensive: bool = False, methods: Sequence[str] = (), tasks: Sequence[str] = (), db=None,
              log: Callable[[str], None] = print, records_folder: Path = RECORDS) -> list[StoredRecord]:
    """Re-run ``paper``'s plans through the harness and rewrite its records file.

    Records the plans do not produce (skipped expensive plans, values taken from documents) are kept
    as they are while a paper value asks for them, and a recomputed record whose number did not change
    keeps its line, so the rewritten file differs only where a recomputed number differs.
    """
    chosen, skipped = plans(paper, expensive=expensive, methods=methods, tasks=tasks)
    for plan in skipped:
        log(f"skipped (too expensive by default, --expensive runs it): {', '.join(plan.specs)} on {plan.tasks} — {plan.cost}")
    provenance = f"recomputed: embedlab reproduce --recompute --paper {paper}" + (" --expensive" if expensive else "")
    return store_recomputed(paper, run_plans(paper, chosen, db=db, log=log, provenance=provenance), records_folder)


def run_plans(paper: str, chosen: Sequence[RecomputePlan], *, db=None, log: Callable[[str], None] = print,
              provenance: str) -> dict[tuple, StoredRecord]:
    """Run ``chosen`` plans through the harness; the records the paper values ask for, by key."""
    from embedlab.evaluation import evaluate, parse_tasks
    from embedlab.methods.registry import load
    from embedlab.results.database import code_version

    wanted = needed_keys(paper)
    version = code_version()
    fresh: dict[tuple, StoredRecord] = {}
    for plan in chosen:
        tasks = parse_tasks(plan.tasks, **dict(plan.task_options))
        specs = ((plan.intersections_with,) if plan.intersections_with else ()) + plan.specs
        methods = [load(spec) for spec in specs]
        fingerprints = {method.spec: method.fingerprint for method in methods}
        produced: list[StoredRecord] = []
        for task in tasks:
            log(f"{paper}: {', '.join(specs)} on {task.name}:{task.dataset}")
            run = evaluate(methods, [task], db=db, intersections=plan.intersections_with is not None, log=log)
            for record in run.records:
                produced.append(replace(stored_from(record, fingerprint=fingerprints.get(record.method, ""), code_version=version,
                                                    provenance=provenance, protocol=plan.protocol),
                                        subset=record.subset + plan.subset_suffix))
        fresh.update({stored.key: stored for stored in produced if stored.key in wanted})
        if plan.epsilon_search:  # kept whatever grid wins: the paper values then name the grid
            fresh.update({stored.key: stored for stored in
                          alignsim_epsilon_records(methods, tasks, fingerprints, version=version, provenance=provenance)})
    return fresh


def store_recomputed(paper: str, fresh: dict[tuple, StoredRecord], records_folder: Path = RECORDS) -> list[StoredRecord]:
    """Merge freshly computed records into ``paper``'s records file and return them all.

    A recomputed record whose number did not change keeps its line (and the code version that first produced
    it); records not recomputed now are kept as they are while a paper value asks for them."""
    previous = {record.key: record for record in read_records(paper, records_folder)}
    wanted = needed_keys(paper)
    for key, record in list(fresh.items()):
        old = previous.get(key)
        if (old is not None and old.recomputed and old.n == record.n and old.unit == record.unit
                and math.isclose(old.value, record.value, rel_tol=1e-12, abs_tol=1e-15)):
            fresh[key] = old  # the same number: keep the line (and the code version that first produced it)
    kept = [record for key, record in previous.items() if key not in fresh and key in wanted]  # no paper value asks for the others
    write_records(paper, [*kept, *fresh.values()], records_folder)
    return read_records(paper, records_folder)
