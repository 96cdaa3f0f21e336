"""The papers beside our numbers: paper values as data, stored records, one comparison report.

Three inputs, all committed in the package so a fresh clone renders the report at once:

* ``resources/paper_values/<paper>.csv`` — every paper cell we reproduce or compare with, as printed;
* ``resources/records/<paper>.jsonl`` — our numbers, one harness record per line with its unit, code
  version, model fingerprint, provenance and protocol (both described in :mod:`.values`, with the units);
* ``resources/recompute_plans.toml`` — which (method spec, tasks) regenerate a paper's records through the
  harness, what each costs, and which are too expensive to run by default (:mod:`.plans`).

:func:`compare` turns a paper value and its record into a :class:`Row` with a status (:mod:`.compare`);
:func:`render_markdown` and :func:`render_html` write the report (:mod:`.render`, styled by
``resources/reproduce_report.css``); :func:`recompute` re-runs plans (:mod:`.recomputing`), and
:func:`alignsim_epsilon_records` fits ALIGN-SIM's ε grid (:mod:`.epsilon`).
"""

from __future__ import annotations

from embedlab.results.reproduce.compare import Row, compare, report_rows
from embedlab.results.reproduce.epsilon import EPSILON_LARGEST, EPSILON_STEP, alignsim_epsilon_records
from embedlab.results.reproduce.plans import RECOMPUTE_PLANS, RecomputePlan, plan_for, plans
from embedlab.results.reproduce.recomputing import recompute, run_plans, store_recomputed
from embedlab.results.reproduce.render import format_number, render_html, render_markdown, write_report
from embedlab.results.reproduce.values import (KINDS, PAPER_VALUES, PAPERS, PRINTED_SCALES, RECORD_FIELDS, RECORDS,
                                               SCALED_UNITS, STATUSES, PaperValue, StoredRecord, convert, needed_keys,
                                               paper_values, read_records, stored_from, unit_of, write_records)

__all__ = ["Row", "compare", "report_rows", "EPSILON_LARGEST", "EPSILON_STEP", "alignsim_epsilon_records",
           "RECOMPUTE_PLANS", "RecomputePlan", "plan_for", "plans", "recompute", "run_plans", "store_recomputed",
           "format_number", "render_html", "render_markdown", "write_report", "KINDS", "PAPER_VALUES", "PAPERS",
           "PRINTED_SCALES", "RECORD_FIELDS", "RECORDS", "SCALED_UNITS", "STATUSES", "PaperValue", "StoredRecord",
           "convert", "needed_keys", "paper_values", "read_records", "stored_from", "unit_of", "write_records"]
