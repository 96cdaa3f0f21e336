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
Nothing is re-exported here: import each name from its module.
"""
