"""The evaluation harness: one :class:`Task` interface, one module per evaluation of the four papers.

Every task class declares its datasets, options, headline metric and metric descriptions
(:mod:`embedlab.evaluation.base`); :mod:`embedlab.evaluation.harness` lists them in ``TASKS`` and runs
them (:func:`evaluate`). The names below are that module's, resolved on first use, so that importing one
task module (or the command line's argument parser) does not import every task's libraries.
"""

from __future__ import annotations

__all__ = ["Task", "Method", "Metric", "NotApplicableError", "TASKS", "TASK_FAMILIES", "DEFAULT_DATASETS", "QUICK",
           "parse_tasks", "metric_of", "headline_of", "evaluate", "EvaluationRun"]


def __getattr__(name: str):
    if name in __all__:
        from embedlab.evaluation import harness

        return getattr(harness, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
