"""Recompute plans: which method specs and tasks regenerate each paper's committed records, as data.

The plans are a table, ``resources/recompute_plans.toml`` (one ``[[paper]]`` entry per plan, with its measured
run time), read once into :data:`RECOMPUTE_PLANS`; a new plan is an entry there, not code. :func:`plans`
selects what a ``--recompute`` runs, :func:`plan_for` the plan behind one paper value.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from embedlab.results.reproduce.values import PAPERS, RESOURCES, PaperValue, check_paper

PLANS_FILE = RESOURCES / "recompute_plans.toml"


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


def _expand(value: object, shared: dict[str, object]) -> object:
    """``value`` with ``{name}`` replaced by the shared text of that name, and a list element that is exactly
    ``{name}`` of a shared list replaced by the list's elements; an unknown name is an error in the file."""
    def text(match: re.Match) -> str:
        if not isinstance(shared.get(match.group(1)), str):
            raise ValueError(f"{PLANS_FILE}: no shared text {match.group(1)!r} in [shared]")
        return shared[match.group(1)]

    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", text, value)
    if not isinstance(value, list):
        return value
    expanded: list[object] = []
    for element in value:
        whole = re.fullmatch(r"\{(\w+)\}", element) if isinstance(element, str) else None
        if whole and isinstance(shared.get(whole.group(1)), list):
            expanded += shared[whole.group(1)]
        else:
            expanded.append(_expand(element, shared))
    return expanded


def _plan(entry: dict, shared: dict[str, object]) -> RecomputePlan:
    entry = {key: _expand(value, shared) for key, value in entry.items()}
    options = tuple((name, tuple(value) if isinstance(value, list) else value)
                    for name, value in entry.pop("task_options", {}).items())
    return RecomputePlan(specs=tuple(entry.pop("specs")), task_options=options, **entry)


def read_plans(path: Path = PLANS_FILE) -> dict[str, tuple[RecomputePlan, ...]]:
    """Every paper's plans from the plans table, in its order."""
    with open(path, "rb") as handle:
        table = tomllib.load(handle)
    shared = table.pop("shared", {})
    unknown = set(table) - set(PAPERS)
    if unknown:
        raise ValueError(f"{path}: unknown paper(s) {sorted(unknown)}; choose from {', '.join(PAPERS)}")
    return {paper: tuple(_plan(entry, shared) for entry in table.get(paper, ())) for paper in PAPERS}


RECOMPUTE_PLANS: dict[str, tuple[RecomputePlan, ...]] = read_plans()


def plans(paper: str, *, expensive: bool = False, methods: Sequence[str] = (),
          tasks: Sequence[str] = ()) -> tuple[list[RecomputePlan], list[RecomputePlan]]:
    """(plans to run, plans skipped as too expensive) for ``paper``; ``methods`` keeps only the plans that
    name one of these specs, ``tasks`` only those that run one of these ``family:dataset`` tasks (a subset
    of a long recompute, e.g. one Appendix G row, or one dataset's Eq. 3 intersections)."""
    check_paper(paper)
    wanted = [plan for plan in RECOMPUTE_PLANS[paper] if (not methods or set(methods) & set(plan.specs))
              and (not tasks or set(tasks) & set(plan.tasks.split(",")))]
    chosen = [plan for plan in wanted if expensive or not plan.expensive]
    skipped = [plan for plan in wanted if plan not in chosen]
    if methods or tasks:  # run only the asked-for specs and tasks of the chosen plans
        chosen = [replace(plan, specs=tuple(spec for spec in plan.specs if not methods or spec in methods),
                          tasks=",".join(task for task in plan.tasks.split(",") if not tasks or task in tasks)) for plan in chosen]
    return chosen, skipped


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
