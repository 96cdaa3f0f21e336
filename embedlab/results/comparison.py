"""``embedlab compare``: which differences between methods are real (docs/evaluation.md, "Uncertainty").

Per task dataset, on its headline metric (or the one asked for), every method against the first: the
paired difference (method − first) with its paired-bootstrap 95 % interval and p-value, from the per-unit
scores stored with the records (no text is encoded again), and, for correlations with the same gold
scores, Williams' t, Steiger's Z and Zou's interval. The p-values of every test of the call are adjusted
together (Holm–Bonferroni). A method is marked *tied with the best* of its dataset when its paired test
against the best method (Holm-adjusted over the dataset's tests against the best) finds no difference at
α = 0.05; the best is marked ``best``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from embedlab.errors import InputError
from embedlab.evaluation.harness import headline_of, metric_of
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.settings_groups import compact_settings
from embedlab.evaluation.significance import (
    DependentCorrelations,
    PairedDifference,
    check_same_units,
    dependent_correlations,
    holm,
    paired_difference,
)
from embedlab.results.metric_names import resolve_metric

ALPHA = 0.05
COLUMNS = ("task", "dataset", "subset", "metric", "method", "value", "ci_low", "ci_high", "diff", "diff_ci_low",
           "diff_ci_high", "p", "p_holm", "williams_t", "williams_p", "steiger_z", "steiger_p", "zou_low", "zou_high",
           "tie", "n", "resampled", "note", "settings")


@dataclass
class Row:
    """One method on one task dataset: its record, and (for all but the first) its comparison with the first."""

    record: Record
    difference: PairedDifference | None = None
    analytic: DependentCorrelations | None = None
    p_holm: float | None = None
    tie: str = ""  # "best", "tied" (with the best) or ""
    resampled: str = ""

    def values(self) -> list[object]:
        """The row's values in :data:`COLUMNS` order (None where a column does not apply)."""
        r, d, a = self.record, self.difference, self.analytic
        difference = (d.diff, d.low, d.high, d.p) if d else (None,) * 4
        analytic = (a.williams_t, a.williams_p, a.steiger_z, a.steiger_p, a.zou_low, a.zou_high) if a else (None,) * 6
        return [r.task, r.dataset, r.subset, r.metric, r.method, r.value, r.ci_low, r.ci_high, *difference, self.p_holm,
                *analytic, self.tie, r.n, self.resampled, (d.note if d else None) or r.ci_note, compact_settings(r.settings)]


@dataclass
class Comparison:
    """The rows of one ``compare`` call, grouped by (task, dataset, subset, metric) in input order."""

    rows: list[Row] = field(default_factory=list)


def compared_records(records: Sequence[Record], metric: str | None) -> list[Record]:
    """The records a comparison uses: per (method, task, dataset), ``metric`` (default the headline), from
    the ``all`` subset when there is one, else from every subset; Eq. 3 rows (``vs …``) are left out."""
    metric = resolve_metric(metric, {r.metric for r in records}) if metric else None  # other tools' names too
    chosen = [r for r in records if r.metric == (metric or headline_of(r.task, r.dataset)) and not r.subset.startswith("vs ")]
    pooled = {(r.method, r.task, r.dataset) for r in chosen if r.subset == "all"}
    return [r for r in chosen if r.subset == "all" or (r.method, r.task, r.dataset) not in pooled]


def _groups(records: Sequence[Record], methods: Sequence[str] | None) -> dict[tuple[str, str, str, str], dict[str, Record]]:
    """Records by (task, dataset, subset, metric), then method; with ``methods``, every group must have them all."""
    groups: dict[tuple[str, str, str, str], dict[str, Record]] = {}
    for record in records:
        groups.setdefault((record.task, record.dataset, record.subset, record.metric), {})[record.method] = record
    for key, by_method in groups.items() if methods is not None else ():
        missing = [m for m in methods if m not in by_method]
        if missing:
            raise InputError(f"{key[0]}/{key[1]} {key[2]} {key[3]}: no result for {', '.join(missing)} "
                             "(a pairwise method on a task that needs vectors?); compare it on other tasks")
    return groups


def _best(by_method: dict[str, Record], methods: Sequence[str]) -> str:
    lower = metric_of(by_method[methods[0]].task, by_method[methods[0]].metric).lower_is_better
    return (min if lower else max)(methods, key=lambda m: by_method[m].value)


def compare_records(records: Sequence[Record], units: dict[tuple[str, str, str, str, str], UnitScores],
                    methods: Sequence[str], *, resamples: int, seed: int, metric: str | None = None) -> Comparison:
    """Compare ``methods`` (the first is the reference) on ``records``, with ``units`` by (method, task,
    dataset, subset, metric)."""
    if len(methods) < 2:
        raise InputError("compare needs at least two methods (each is compared with the first)")
    if resamples < 1:
        raise InputError("compare needs bootstrap resamples (--bootstrap ≥ 1)")
    comparison, tests = Comparison(), []
    for key, by_method in _groups(compared_records(records, metric), methods).items():
        by_method = {method: by_method[method] for method in methods}
        unit_of = _paired_units(by_method, units, key)
        first = unit_of[methods[0]]
        group = []
        for method in methods:
            row = Row(by_method[method], resampled=first.resampled)
            if method != methods[0]:
                row.difference = paired_difference(unit_of[method], first, resamples, seed)
                row.analytic = dependent_correlations(unit_of[method], first)
                tests.append(row)
            group.append(row)
        versus_best = against_best(by_method, unit_of, resamples, seed)
        for row in group:
            row.tie = versus_best.mark(row.record.method)
        comparison.rows += group
    for row, adjusted in zip(tests, holm([row.difference.p for row in tests])):
        row.p_holm = adjusted
    return comparison


@dataclass
class AgainstBest:
    """The methods of one task dataset against its best: each other method's paired difference from the best
    (method − best, its paired-bootstrap interval and p-value), Holm-adjusted over these tests, and the methods
    tied with the best (no difference at α after Holm). ``records`` holds every method's record, in input order."""

    best: str
    records: dict[str, Record]
    differences: dict[str, PairedDifference] = field(default_factory=dict)
    p_holm: dict[str, float | None] = field(default_factory=dict)
    tied: set[str] = field(default_factory=set)
    untested: str | None = None  # why no paired test ran (no per-unit scores, units that do not pair)

    def mark(self, method: str) -> str:
        """``best``, ``tied`` (with the best) or ``""``."""
        return "best" if method == self.best else ("tied" if method in self.tied else "")


def against_best(by_method: dict[str, Record], unit_of: dict[str, UnitScores], resamples: int, seed: int) -> AgainstBest:
    """Every method of ``by_method`` against the best of them, on the paired per-unit scores ``unit_of``."""
    best = _best(by_method, list(by_method))
    found = AgainstBest(best, dict(by_method))
    others = [method for method in by_method if method != best]
    found.differences = {method: paired_difference(unit_of[method], unit_of[best], resamples, seed) for method in others}
    adjusted = holm([found.differences[method].p for method in others])
    found.p_holm = dict(zip(others, adjusted))
    found.tied = {method for method, p in found.p_holm.items() if p is None or p >= ALPHA}
    return found


def _paired_units(by_method: dict[str, Record], units: dict[tuple[str, str, str, str, str], UnitScores],
                  key: tuple[str, str, str, str]) -> dict[str, UnitScores]:
    """The per-unit scores of every method of one group, checked to pair (else one clear error)."""
    task, dataset, subset, name = key
    what = f"{task}/{dataset} {subset} {name}"
    unit_of = {}
    for method in by_method:
        found = units.get((method, task, dataset, subset, name))
        if found is None:
            raise InputError(f"{what} of {method} has no per-unit scores (stored before they were kept, or a "
                             "metric without an interval: see its ci_note); recompute it with eval --force")
        unit_of[method] = found
    first = next(iter(unit_of.values()))
    for method in list(unit_of)[1:]:
        check_same_units(first, unit_of[method], what)
    return unit_of


def best_per_group(records: Sequence[Record], units: dict[tuple[str, str, str, str, str], UnitScores], *,
                   resamples: int, seed: int, metric: str | None = None,
                   untested: str = "raise") -> dict[tuple[str, str, str, str], AgainstBest]:
    """Per (task, dataset, subset, metric) of the compared records (:func:`compared_records`), its methods against
    its best. A group of one method is its own best (no test). A group whose per-unit scores are missing (a metric
    without an interval: isotropy's IsoScore, ALIGN-SIM's differences of means) or do not pair: with ``untested``
    ``"raise"`` one clear error; ``"skip"`` left out (the report: no mark rather than a wrong one); ``"keep"`` kept
    with its best alone, no tie, and the reason in ``untested`` (``choose``: a value still ranks)."""
    groups = {}
    for key, by_method in _groups(compared_records(records, metric), None).items():
        if len(by_method) == 1:
            groups[key] = AgainstBest(next(iter(by_method)), dict(by_method))
            continue
        try:
            unit_of = _paired_units(by_method, units, key)
        except InputError as error:
            if untested == "raise":
                raise
            if untested == "keep":
                groups[key] = AgainstBest(_best(by_method, list(by_method)), dict(by_method), untested=str(error))
            continue
        groups[key] = against_best(by_method, unit_of, resamples, seed)
    return groups


def tie_marks(records: Sequence[Record], units: dict[tuple[str, str, str, str, str], UnitScores], *, resamples: int,
              seed: int) -> dict[tuple[str, str, str, str, str], str]:
    """For the report: per headline record key (method, task, dataset, subset, metric), ``best`` or ``tied``
    (with the best), for every group of two or more methods whose per-unit scores pair; other groups get no marks."""
    return marks_of(best_per_group(records, units, resamples=resamples, seed=seed, untested="skip"))


def marks_of(groups: dict[tuple[str, str, str, str], AgainstBest]) -> dict[tuple[str, str, str, str, str], str]:
    """Per record key (method, task, dataset, subset, metric), ``best`` or ``tied``, of the groups of two or more."""
    return {(method, *key): group.mark(method) for key, group in groups.items() if len(group.records) > 1
            for method in group.records if group.mark(method)}


def _number(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "" if value is None else (f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}")


def _bootstrap_p(value: float | None, resamples: int) -> str:
    """A bootstrap p-value; at its floor 2/(B + 1) (no resample on the far side of 0) the true p is only known
    to be at most that: printed "≤ floor", never as if measured."""
    if value is not None and value <= 2 / (resamples + 1) * (1 + 1e-9):
        return f"≤ {_p(value)}"
    return _p(value)


def _table_row(row: Row) -> list[str]:
    """A row for people: value [CI], diff [CI], p, Holm's p, the analytic tests, the tie mark."""
    r, d, a = row.record, row.difference, row.analytic
    value = _number(r.value) + (f" [{_number(r.ci_low)}, {_number(r.ci_high)}]" if r.has_interval else "")
    diff = ""
    if d is not None:
        diff = f"{d.diff:+.4f}" + (f" [{d.low:+.4f}, {d.high:+.4f}]" if d.low is not None else f" ({d.note})")
    analytic = ""
    if a is not None:
        analytic = (f"t={a.williams_t:.2f} (p={_p(a.williams_p)}), Z={a.steiger_z:.2f} (p={_p(a.steiger_p)}), "
                    f"Zou [{a.zou_low:+.4f}, {a.zou_high:+.4f}]")
    mark = {"best": "best", "tied": "tied with best"}.get(row.tie, "")
    return [r.task, r.dataset, r.subset, r.metric, r.method, value, diff, _bootstrap_p(d.p, d.resamples) if d else "", _p(row.p_holm),
            analytic, mark]


def format_comparison(comparison: Comparison, output_format: str) -> str:
    """The comparison in one of the ``--format``s: a table for people, or every column for programs."""
    from embedlab.results.tables import render

    if output_format in ("json", "csv"):
        return render(COLUMNS, [row.values() for row in comparison.rows], output_format)
    header = ["task", "dataset", "subset", "metric", "method", "value [95% CI]", "diff vs first [95% CI]", "p", "p_holm",
              "dependent correlations (Williams, Steiger, Zou)", "tie"]
    rows = [_table_row(row) for row in comparison.rows]
    if any(row.record.settings for row in comparison.rows):  # the settings group compared, when not the defaults
        header.insert(4, "settings")
        for cells, row in zip(rows, comparison.rows):
            cells.insert(4, compact_settings(row.record.settings))
    return render(header, rows, output_format)
