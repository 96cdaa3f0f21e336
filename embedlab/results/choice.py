"""``embedlab choose``: which method for my budget (docs/evaluation.md, "Choosing a method").

Per task dataset, on its headline metric (``Task.headline_metric``, or ``--metric``): every method's value with
its 95 % interval, whether it is statistically tied with the best (the paired test of ``compare``:
:func:`embedlab.results.comparison.best_per_group`), what computing its vectors cost (the record's ``cost``:
texts per second, bytes per vector, peak memory), and whether it is on the **Pareto front** over four
objectives: quality (a method tied with the best counts as equal to the best), texts per second (higher is
better), bytes per vector and peak memory (lower is better). A method is off the front only if another is at
least as good on all four and better on one.

A cost figure that was not measured (no cost recorded, a figure the method cannot give) proves nothing either
way: "at least as good" needs both figures, so a method with a missing figure is never dominated and never
dominates on that account. It stays on the front, and its row lists the missing figures (``cost_missing``).

Three budgets get a pick each: the best; the fastest (texts per second) of those tied with the best; the
smallest vectors (bytes per vector) of those within ``within`` (default 0.01) of the best value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from embedlab.errors import InputError
from embedlab.evaluation.harness import metric_of
from embedlab.evaluation.records import Record
from embedlab.evaluation.significance import PairedDifference
from embedlab.results.comparison import AgainstBest

# the cost figures the front is drawn over, and which way is better
COST_FIGURES: dict[str, str] = {"texts_per_second": "higher", "bytes_per_vector": "lower", "peak_memory_mb": "lower"}
# the budgets a pick is made for, in the order they are printed
BUDGETS = ("best", "fastest tied with the best", "smallest vectors within {within} of the best")
DEFAULT_WITHIN = 0.01


@dataclass
class Candidate:
    """One method on one task dataset: its headline record, its test against the best, its cost, its place."""

    record: Record
    mark: str = ""  # "best", "tied" (with the best) or ""
    difference: PairedDifference | None = None  # method − best, paired (None for the best itself)
    p_holm: float | None = None
    pareto: bool = True
    picked_for: list[str] = field(default_factory=list)

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def tied_with_best(self) -> bool:
        return self.mark in ("best", "tied")

    def figure(self, name: str) -> float | None:
        """A cost figure of :data:`COST_FIGURES` (or another key of the cost), None where it was not measured."""
        value = (self.record.cost or {}).get(name)
        return None if value is None else float(value)

    @property
    def missing(self) -> list[str]:
        """The cost figures of the front that were not measured."""
        return [name for name in COST_FIGURES if self.figure(name) is None]


@dataclass
class Choice:
    """One task dataset's candidates (input order), the settings their task ran with, and the picks by budget."""

    key: tuple[str, str, str, str]  # task, dataset, subset, metric
    candidates: list[Candidate]
    settings: dict
    picks: dict[str, Candidate | None] = field(default_factory=dict)
    untested: str | None = None  # why no paired test ran: then only the best counts as the best quality


def check_rankable(tasks: Sequence, metric: str | None) -> None:
    """One clear error, before any work, for a task that gives nothing to rank on: no headline metric, or a
    metric (its headline or ``metric``) that declares no better direction."""
    for task in tasks:
        name = metric or task.headline_of(task.dataset)
        if name is None:
            raise InputError(f"task {task.name}/{task.dataset} declares no headline metric to rank methods on; "
                             "give --metric")
        if not task.metric(name).better:
            raise InputError(f"metric {name} of task {task.name}/{task.dataset} is neither higher- nor lower-is-better, "
                             "so it cannot rank methods; give --metric with one that is")


def _objectives(candidate: Candidate, best: Record, lower_is_better: bool) -> list[float | None]:
    """The four objectives, each turned so that higher is better; quality of a method tied with the best is the
    best's value."""
    quality = best.value if candidate.tied_with_best else candidate.record.value
    objectives = [-quality if lower_is_better else quality]
    for name, better in COST_FIGURES.items():
        value = candidate.figure(name)
        objectives.append(None if value is None else (value if better == "higher" else -value))
    return objectives


def dominates(first: Sequence[float | None], second: Sequence[float | None]) -> bool:
    """Whether objectives ``first`` dominate ``second`` (higher is better): at least as good on every one and
    better on one; an objective missing on either side is not "at least as good"."""
    if any(a is None or b is None or a < b for a, b in zip(first, second)):
        return False
    return any(a > b for a, b in zip(first, second))


def _within(candidate: Candidate, best: Record, within: float) -> bool:
    return abs(candidate.record.value - best.value) <= within


def _pick(candidates: Sequence[Candidate], figure: str, better: str, lower_quality: bool) -> Candidate | None:
    """The candidate with the best measured ``figure`` (ties: the better quality, then the first given)."""
    measured = [c for c in candidates if c.figure(figure) is not None]
    if not measured:
        return None
    sign = 1 if better == "higher" else -1
    quality = -1 if lower_quality else 1
    return max(measured, key=lambda c: (sign * c.figure(figure), quality * c.record.value, -candidates.index(c)))


def choose(groups: dict[tuple[str, str, str, str], AgainstBest], *, settings: dict[tuple[str, str], dict] | None = None,
           within: float = DEFAULT_WITHIN) -> list[Choice]:
    """One :class:`Choice` per compared group (:func:`~embedlab.results.comparison.best_per_group`): marks, the
    Pareto front and the pick for each budget; ``settings`` by (task, dataset) are what each task ran with."""
    if not within >= 0:
        raise InputError(f"--within must be a number ≥ 0, got {within}")
    choices = []
    for key, group in groups.items():
        task, dataset, _, metric = key
        lower = metric_of(task, metric).lower_is_better
        best = group.records[group.best]
        candidates = [Candidate(record, group.mark(method), group.differences.get(method), group.p_holm.get(method))
                      for method, record in group.records.items()]
        objectives = [_objectives(candidate, best, lower) for candidate in candidates]
        for candidate, own in zip(candidates, objectives):
            candidate.pareto = not any(dominates(other, own) for other in objectives if other is not own)
        fastest = _pick([c for c in candidates if c.tied_with_best], "texts_per_second", "higher", lower)
        smallest = _pick([c for c in candidates if _within(c, best, within)], "bytes_per_vector", "lower", lower)
        names = [budget.format(within=f"{within:g}") for budget in BUDGETS]
        choice = Choice(key, candidates, dict((settings or {}).get((task, dataset), {})),
                        dict(zip(names, (candidates[list(group.records).index(group.best)], fastest, smallest))),
                        group.untested)
        for budget, picked in choice.picks.items():
            if picked is not None:
                picked.picked_for.append(budget)
        choices.append(choice)
    return choices


# ---------------------------------------------------------------------------------------------- output

# ``--format json|csv``: one object (row) per method and task dataset
COLUMNS = ("task", "dataset", "subset", "metric", "method", "value", "ci_low", "ci_high", "tie", "tied_with_best",
           "diff_vs_best", "diff_ci_low", "diff_ci_high", "p_holm", "untested", "pareto", "texts_per_second", "bytes_per_vector",
           "peak_memory_mb", "encode_seconds", "cpu_seconds", "parameters", "cost_partial", "cost_missing", "cost_note",
           "picked_for", "settings")


def _settings_text(settings: dict) -> str:
    """``k=10 search=hnsw`` or ``defaults``: the settings group the rows come from, as ``--settings`` reads it."""
    from embedlab.evaluation.settings_groups import DEFAULTS_TEXT, compact_settings

    return compact_settings(settings) or DEFAULTS_TEXT


def row_values(choice: Choice, candidate: Candidate) -> list[object]:
    """A candidate's values in :data:`COLUMNS` order (None where a column does not apply)."""
    r, d, cost = candidate.record, candidate.difference, candidate.record.cost or {}
    difference = (d.diff, d.low, d.high) if d is not None else (None,) * 3
    return [*choice.key, r.method, r.value, r.ci_low, r.ci_high, candidate.mark,
            candidate.tied_with_best, *difference, candidate.p_holm, choice.untested, candidate.pareto,
            *(candidate.figure(name) for name in COST_FIGURES), cost.get("encode_seconds"), cost.get("cpu_seconds"),
            cost.get("parameters"), cost.get("partial"), ",".join(candidate.missing) or None, cost.get("note"),
            "; ".join(candidate.picked_for) or None, _settings_text(choice.settings)]


def _figure_text(value: float | None, digits: int) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if value < 100 else f"{value:,.0f}"


def _table_row(choice: Choice, candidate: Candidate) -> list[str]:
    """A row for people: value [CI], difference from the best [paired CI], tie, the three costs, front, picks."""
    from embedlab.results.tables import format_cell

    r, d = candidate.record, candidate.difference
    versus = "" if d is None else f"{d.diff:+.4f}" + (f" [{d.low:+.4f}, {d.high:+.4f}]" if d.low is not None else "")
    mark = {"best": "best", "tied": "tied with best"}.get(candidate.mark, "")
    return [choice.key[0], choice.key[1], choice.key[3], r.method, format_cell(r), versus, mark,
            _figure_text(candidate.figure("texts_per_second"), 1), _figure_text(candidate.figure("bytes_per_vector"), 0),
            _figure_text(candidate.figure("peak_memory_mb"), 1), "yes" if candidate.pareto else "no",
            "; ".join(candidate.picked_for)]


def pick_lines(choice: Choice) -> list[str]:
    """What to pick under each budget, and the cost notes, for the human formats."""
    task, dataset, subset, metric = choice.key
    lines = [f"{task}/{dataset} {subset} {metric} (task settings: {_settings_text(choice.settings)}):"]
    if choice.untested:
        lines.append(f"  no paired test, so no method is marked tied with the best: {choice.untested}")
    for budget, picked in choice.picks.items():
        lines.append(f"  {budget}: " + (picked.method if picked is not None else "none (no method with the figure measured)"))
    for candidate in choice.candidates:
        cost = candidate.record.cost or {}
        notes = [f"not measured: {', '.join(candidate.missing)} (kept on the front)"] if candidate.missing else []
        notes += ["partial figures (--engine ray or --corpus-vectors)"] if cost.get("partial") else []
        notes += [cost["note"]] if cost.get("note") else []
        if notes:
            lines.append(f"  {candidate.method}: {'; '.join(notes)}")
    return lines


def format_choices(choices: Sequence[Choice], output_format: str, notes: Sequence[str] = ()) -> str:
    """The choices in one ``--format``: for programs one row per method (:data:`COLUMNS`), for people a table
    and, under it, the pick for each budget (and ``notes``, e.g. the methods a task skipped)."""
    from embedlab.results.tables import render

    if output_format in ("json", "csv"):
        return render(COLUMNS, [row_values(choice, c) for choice in choices for c in choice.candidates], output_format)
    header = ["task", "dataset", "metric", "method", "value [95% CI]", "vs best [paired 95% CI]", "tie", "texts/s",
              "bytes/vector", "peak MB", "Pareto", "pick for"]
    table = render(header, [_table_row(choice, c) for choice in choices for c in choice.candidates], output_format)
    blocks = [pick_lines(choice) for choice in choices] + [list(notes)]
    if output_format == "markdown":  # a paragraph per task dataset, its picks a list under it
        blocks = [[f"- {line.strip()}" if line.startswith("  ") else line for line in block] for block in blocks]
    return "\n\n".join([table, *("\n".join(block) for block in blocks if block)])
