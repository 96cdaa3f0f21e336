"""ALIGN-SIM Table 3 with its ε grid fitted to the paper, from the per-item margins the tasks stored."""

from __future__ import annotations

from collections.abc import Sequence

from embedlab.results.reproduce.values import StoredRecord, convert, paper_values

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
