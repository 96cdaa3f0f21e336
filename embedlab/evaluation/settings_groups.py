"""Task settings as part of a stored result's identity: their one canonical text, their compact display,
the ``--settings KEY=VALUE`` filter, and which settings group a command's task options name.

A stored row is identified by (method, task, dataset, subset, metric) *and* the task settings it was computed
under (``Task.settings()``: the options that change a metric's value and differ from the task's defaults;
``{}`` is the defaults). A run with other settings adds rows beside the earlier ones; the bootstrap's B and
seed are no part of it (an interval is a recomputable attribute of its row).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from embedlab.errors import InputError
from embedlab.evaluation.base import Task
from embedlab.evaluation.records import Record

DEFAULTS_TEXT = "defaults"  # how the group of default settings is shown and named in --settings


def settings_json(settings: Mapping[str, Any] | None) -> str:
    """The canonical JSON text of ``settings`` (sorted keys, no spaces; ``{}`` for the defaults): the text the
    results database keys rows by, so equal settings always give the same key."""
    return json.dumps(dict(settings or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _value_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def compact_settings(settings: Mapping[str, Any] | None) -> str:
    """``k=10 search=hnsw`` (sorted keys, space-separated; values as typed in ``--settings``), or ``""`` for the
    defaults."""
    return " ".join(f"{key}={_value_text(value)}" for key, value in sorted((settings or {}).items()))


def parse_settings_filter(items: Sequence[str] | None) -> dict[str, str] | None:
    """``--settings`` values (repeatable, each ``KEY=VALUE[,KEY=VALUE …]``) as {key: value text}; ``defaults``
    asks for the rows of default settings only ({}); None when no filter is given. A comma followed by no
    ``KEY=`` continues the previous value, so ``k=1,5,10`` is one cut-off list."""
    if not items:
        return None
    wanted: dict[str, str] = {}
    for item in items:
        if item.strip() == DEFAULTS_TEXT:
            continue
        key = None
        for piece in item.split(","):
            name, equals, value = piece.partition("=")
            if equals and name.strip():
                key = name.strip()
                wanted[key] = value.strip()
            elif key is not None:
                wanted[key] += "," + piece.strip()
            else:
                raise InputError(f"--settings {item!r}: expected KEY=VALUE (e.g. k=10 or search=hnsw) or {DEFAULTS_TEXT}")
    if wanted and any(item.strip() == DEFAULTS_TEXT for item in items):
        raise InputError(f"--settings {DEFAULTS_TEXT} names the rows of default settings; it cannot be combined with KEY=VALUE")
    return wanted


def matches_settings(settings: Mapping[str, Any], wanted: Mapping[str, str] | None) -> bool:
    """Whether a row's ``settings`` pass the filter ``wanted`` (:func:`parse_settings_filter`): every wanted key
    holds the wanted value; ``{}`` wants the defaults exactly; None keeps everything."""
    if wanted is None:
        return True
    if not wanted:
        return not settings
    return all(key in settings and _value_text(settings[key]) == value for key, value in wanted.items())


def named_settings(tasks: Iterable[Task]) -> dict[tuple[str, str], dict]:
    """The settings group that a command's task options name, per (task, dataset): each task's own
    ``settings()`` (``{}`` when the options are the defaults). ``compare`` and ``choose`` parse their task
    options as ``eval`` does and read, of every stored settings group, the one this names."""
    return {(task.name, task.dataset): task.settings() for task in tasks}


def in_named_group(records: Iterable[Record], tasks: Iterable[Task]) -> list[Record]:
    """The records of the settings group ``tasks``' options name (records of other tasks are left out)."""
    groups = {key: settings_json(settings) for key, settings in named_settings(tasks).items()}
    return [record for record in records if groups.get((record.task, record.dataset)) == settings_json(record.settings)]


def describe_named_settings(tasks: Iterable[Task]) -> str:
    """One line saying which settings group the options name: ``settings: defaults`` or, per task dataset
    whose options differ, ``settings: retrieval/scifact@1a2b3c4d k=10 search=hnsw``."""
    groups = [f"{task}/{dataset} {compact_settings(settings)}" for (task, dataset), settings in named_settings(tasks).items()
              if settings]
    return "settings: " + ("; ".join(groups) if groups else DEFAULTS_TEXT)
