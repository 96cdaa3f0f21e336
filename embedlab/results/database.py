"""SQLite results database: every evaluation record with its provenance.

Each stored row is one :class:`~embedlab.evaluation.records.Record` plus the model fingerprint, the code version
(``embedlab.__version__`` and the git commit when known), the seed, the time and optional extra JSON.
A (method, task, dataset) that already has rows counts as finished: evaluators check :meth:`ResultsDB.has`
and reuse the stored records unless forced, so an interrupted multi-task run resumes where it stopped.
Re-adding records for the same (method, task, dataset, subset, metric) replaces the old row.

Each row also stores the identity of the method that computed it (:func:`embedlab.evaluation.base.method_identity`:
canonical spec, model content fingerprint, fitted-state hash — the evaluation cache's key too): a stored
(method, task, dataset) is reused only under that identity, so a method fitted on other texts, or a model
folder whose files changed, is computed again. Rows without an identity (older databases) are never reused.
A database written by a newer embedlab (a higher ``user_version``) is refused, naming both versions.

Each row also keeps its confidence interval (``ci_low``, ``ci_high``, ``ci_resamples``, ``ci_resampled``,
``ci_note``, and ``ci_seed``, the seed its resamples were drawn from) and a description of its per-unit
scores, whose arrays live once each in the ``unit_arrays`` table (:mod:`embedlab.results.units`). The
interval is an attribute of the row: :meth:`ResultsDB.set_intervals` recomputes it in place, so results
computed with and without a bootstrap, or with another B or seed, never become two rows.

A row's identity also holds the task settings it was computed under (``settings``: canonical JSON of the
non-default options, ``{}`` for the defaults; :mod:`embedlab.evaluation.settings_groups`): a run with another
``--k``, ``--search``, ``--rescore``, seed … adds rows beside the earlier ones, and every method keyed on a
(method, task, dataset) takes the settings group too. Rows are removed only by :meth:`ResultsDB.delete`
(``embedlab results --delete``). Each row also keeps what computing the method's vectors cost (``cost``,
JSON; :mod:`embedlab.evaluation.cost`).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from embedlab.errors import InputError, InputTypeError
from embedlab.evaluation.records import CI_KEYS, Record, UnitScores, record_of_row
from embedlab.evaluation.settings_groups import settings_json
from embedlab.results import units as unit_store
from embedlab.runtime.settings import results_path
from embedlab.version import code_version

DEFAULT_FILE = "embedlab_results.sqlite"

_TABLE = """
CREATE TABLE IF NOT EXISTS results (
    method TEXT NOT NULL,
    task TEXT NOT NULL,
    dataset TEXT NOT NULL,
    subset TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    n INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    code_version TEXT NOT NULL,
    seed INTEGER NOT NULL,
    created REAL NOT NULL,
    extra TEXT,
    identity TEXT,
    ci_low REAL,
    ci_high REAL,
    ci_resamples INTEGER,
    ci_resampled TEXT,
    ci_note TEXT,
    ci_seed INTEGER,
    units TEXT,
    settings TEXT NOT NULL DEFAULT '{}',
    cost TEXT,
    PRIMARY KEY (method, task, dataset, subset, metric, settings)
)"""
_SCHEMA = _TABLE + """;
CREATE INDEX IF NOT EXISTS results_by_task ON results (task, dataset);
"""


# PRAGMA user_version of the current layout. 1: classification accuracies are fractions 0–1 (the one
# unit convention, evaluation/base.py UNITS); version 0 files stored them in percent. 2: each row holds
# the identity of the method that computed it (rows of older files have none and are never reused).
# 3: confidence-interval columns and per-unit scores (rows of older files have neither: shown with no interval).
# 4: the task settings in each row's primary key (a table rebuild; older rows lift ``extra["settings"]``) and
# the ``cost`` column (older rows have none).
SCHEMA_VERSION = 4
_INTERVAL_COLUMNS = {"ci_low": "REAL", "ci_high": "REAL", "ci_resamples": "INTEGER", "ci_resampled": "TEXT",
                     "ci_note": "TEXT", "ci_seed": "INTEGER", "units": "TEXT"}


class NewerDatabaseError(sqlite3.DatabaseError):
    """A results database written by a newer embedlab: its layout is not one this version can read."""


def _migrate(connection: sqlite3.Connection, existed: bool) -> None:
    """Bring a database written by an older embedlab to :data:`SCHEMA_VERSION`, in the same transaction,
    so that stored results are never reused in another unit than fresh ones."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise NewerDatabaseError(f"written by a newer embedlab (layout version {version}; this embedlab reads up to "
                                 f"{SCHEMA_VERSION}); upgrade embedlab or give another --db")
    columns = {row[1] for row in connection.execute("PRAGMA table_info(results)")}
    if existed and version < 2 and "identity" not in columns:
        connection.execute("ALTER TABLE results ADD COLUMN identity TEXT")
    if existed and version < 3:
        for column, kind in _INTERVAL_COLUMNS.items():
            if column not in columns:
                connection.execute(f"ALTER TABLE results ADD COLUMN {column} {kind}")
    if existed and version < 1:
        connection.execute("UPDATE results SET value = value / 100 WHERE task = 'classification' "
                           "AND metric IN ('accuracy', 'dev_accuracy')")
    if existed and version < 4 and "settings" not in columns:
        _rebuild_with_settings(connection)
    if version < SCHEMA_VERSION:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


# the columns of a version 3 table, copied as they are by the rebuild
_V3_COLUMNS = ("method, task, dataset, subset, metric, value, n, fingerprint, code_version, seed, created, extra, identity, "
               "ci_low, ci_high, ci_resamples, ci_resampled, ci_note, ci_seed, units")


def _rebuild_with_settings(connection: sqlite3.Connection) -> None:
    """Schema 3 → 4: SQLite cannot change a primary key in place, so the table is rebuilt with the settings
    column in its key; each old row's settings are the ones it stored in ``extra["settings"]`` (``{}``: the
    defaults), in the canonical text new rows use. Row order (``rowid``) is kept."""
    connection.execute("ALTER TABLE results RENAME TO results_v3")
    connection.execute("DROP INDEX IF EXISTS results_by_task")
    connection.execute(_TABLE)
    rows = connection.execute(f"SELECT {_V3_COLUMNS} FROM results_v3 ORDER BY rowid").fetchall()
    extra_at = _V3_COLUMNS.split(", ").index("extra")
    lifted = [(*row, settings_json((json.loads(row[extra_at]) if row[extra_at] else {}).get("settings", {}))) for row in rows]
    marks = ", ".join("?" * (len(_V3_COLUMNS.split(", ")) + 1))
    connection.executemany(f"INSERT INTO results ({_V3_COLUMNS}, settings) VALUES ({marks})", lifted)
    connection.execute("DROP TABLE results_v3")


_KEY = ("method", "task", "dataset", "subset", "metric")
_GROUP = "method = ? AND task = ? AND dataset = ? AND settings = ?"  # one settings group of a (method, task, dataset)


def _interval_row(record: Record, seed: int) -> tuple:
    """A record's interval columns: ci_low … ci_note, then the seed its resamples were drawn from (None
    when no resamples were drawn)."""
    return (*(record.interval()[key] for key in CI_KEYS), int(seed) if record.ci_resamples else None)


def default_path() -> Path:
    """``$EMBEDLAB_RESULTS`` or ``./embedlab_results.sqlite``."""
    return results_path(DEFAULT_FILE)


class ResultsDB:
    """The results database: add records, ask whether a (method, task, dataset) is done, query them back."""

    def __init__(self, path: str | Path | None = None, *, create: bool = True) -> None:
        """Open (and with ``create``, make) the database; reading commands pass ``create=False`` so that a
        mistyped ``--db`` is an error instead of a new empty database."""
        self.path = Path(path).expanduser() if path is not None else default_path()
        if not create and not self.path.is_file():
            raise FileNotFoundError(f"results database not found: {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One short-lived connection per call keeps the object safe to share and the file closed between runs.
        with self._connect() as connection:
            existed = connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'results'").fetchone() is not None
            if existed:  # the layout is checked (and migrated) before anything else touches the table
                _migrate(connection, existed)
            connection.executescript(_SCHEMA + unit_store.TABLE)
            if not existed:
                _migrate(connection, existed)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One transaction on a fresh connection, closed afterwards; a SQLite error says which file it
        came from (a damaged or foreign file is then named in the CLI's one-line error)."""
        try:
            connection = sqlite3.connect(self.path, timeout=60)
            try:
                connection.execute("PRAGMA busy_timeout = 60000")
                with connection:
                    yield connection
            finally:
                connection.close()
        except sqlite3.DatabaseError as error:
            raise type(error)(f"{self.path}: {error}") from error

    def add(self, records: Iterable[Record], *, fingerprint: str, seed: int = 0, extra: dict | None = None,
            identity: str | None = None) -> None:
        """Store ``records`` (all at once, in one transaction) with their provenance, the identity of
        the method that computed them (without one, they are stored but never reused), their intervals
        (drawn from ``seed``), their per-unit scores, and each record's own ``settings`` (part of the row's
        key: a row of other settings is never replaced) and ``cost``."""
        now = time.time()
        version = code_version()
        extra_text = json.dumps(extra, sort_keys=True) if extra else None
        records = list(records)
        for index, record in enumerate(records):
            if not isinstance(record, Record):
                raise InputTypeError(f"record {index} is a {type(record).__name__}, not an embedlab.evaluation.records.Record")
            if math.isnan(float(record.value)):  # SQLite would store NULL, which the table refuses: say which record
                raise InputError(f"record {index} ({record.task}/{record.dataset} {record.subset} {record.metric}) is NaN; "
                                 "the results database stores numbers only")
        with self._connect() as connection:
            rows = [(record.method, record.task, record.dataset, record.subset, record.metric, float(record.value),
                     int(record.n), str(fingerprint), version, int(seed), now, extra_text, identity,
                     *_interval_row(record, seed), unit_store.write(connection, record.units), settings_json(record.settings),
                     json.dumps(record.cost, sort_keys=True) if record.cost is not None else None) for record in records]
            connection.executemany(
                "INSERT OR REPLACE INTO results (method, task, dataset, subset, metric, value, n, fingerprint, code_version, "
                "seed, created, extra, identity, ci_low, ci_high, ci_resamples, ci_resampled, ci_note, ci_seed, units, "
                "settings, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            unit_store.collect_garbage(connection)

    def set_intervals(self, records: Iterable[Record], seed: int) -> None:
        """Replace the stored interval fields of these records' rows (their settings group included) with
        theirs (drawn from ``seed``): the interval is recomputed in place, never a second row."""
        rows = [(*_interval_row(record, seed), *(getattr(record, key) for key in _KEY), settings_json(record.settings))
                for record in records]
        with self._connect() as connection:
            connection.executemany(
                "UPDATE results SET ci_low = ?, ci_high = ?, ci_resamples = ?, ci_resampled = ?, ci_note = ?, ci_seed = ? "
                "WHERE method = ? AND task = ? AND dataset = ? AND subset = ? AND metric = ? AND settings = ?", rows)

    def interval_draws(self, method: str, task: str, dataset: str, settings: dict | None = None) -> set[tuple[int | None, int | None]]:
        """The (B, seed) pairs the stored intervals of this (method, task, dataset) in the settings group
        ``settings`` (None or ``{}``: the defaults) were drawn with, over the rows that keep per-unit scores
        ((None, None): never computed)."""
        with self._connect() as connection:
            rows = connection.execute(
                f"SELECT DISTINCT ci_resamples, ci_seed FROM results WHERE {_GROUP} AND units IS NOT NULL",
                (method, task, dataset, settings_json(settings))).fetchall()
        return {tuple(row) for row in rows}

    def units(self, method: str, task: str, dataset: str, settings: dict | None = None) -> dict[tuple[str, str], UnitScores]:
        """The stored per-unit scores of one (method, task, dataset) in one settings group (None or ``{}``: the
        defaults), by (subset, metric)."""
        with self._connect() as connection:
            rows = connection.execute(f"SELECT subset, metric, units FROM results WHERE {_GROUP} AND units IS NOT NULL",
                                      (method, task, dataset, settings_json(settings))).fetchall()
            return {(subset, metric): unit_store.read(connection, about) for subset, metric, about in rows}

    def has(self, method: str, task: str, dataset: str, settings: dict | None = None) -> bool:
        """Whether results for this (method, task, dataset) are stored in the settings group ``settings``
        (None or ``{}``: the defaults)."""
        with self._connect() as connection:
            row = connection.execute(f"SELECT 1 FROM results WHERE {_GROUP} LIMIT 1",
                                     (method, task, dataset, settings_json(settings))).fetchone()
        return row is not None

    def identities(self, method: str, task: str, dataset: str, settings: dict | None = None) -> set[str | None]:
        """The identities the stored rows of this (method, task, dataset) in one settings group were computed
        under (None: unknown); Eq. 3 intersection rows (subset ``vs …``) carry their pair's identity and are left out."""
        with self._connect() as connection:
            rows = connection.execute(f"SELECT DISTINCT identity FROM results WHERE {_GROUP} AND subset NOT LIKE 'vs %'",
                                      (method, task, dataset, settings_json(settings))).fetchall()
        return {row[0] for row in rows}

    def settings_groups(self, method: str, task: str, dataset: str) -> list[dict]:
        """Every settings group stored for this (method, task, dataset) (``{}``: the task's defaults), in the
        order they were first stored."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT settings FROM results WHERE method = ? AND task = ? AND dataset = ? GROUP BY settings ORDER BY MIN(rowid)",
                (method, task, dataset)).fetchall()
        return [json.loads(row[0]) for row in rows]

    def _select(self, columns: str, method: str | None, task: str | None, dataset: str | None,
                settings: dict | None = None) -> list[tuple]:
        clauses, arguments = [], []
        for column, value in (("method", method), ("task", task), ("dataset", dataset)):
            if value is not None:
                clauses.append(f"{column} = ?")
                arguments.append(value)
        if settings is not None:
            clauses.append("settings = ?")
            arguments.append(settings_json(settings))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._connect() as connection:
            return connection.execute(
                f"SELECT {columns} FROM results{where} ORDER BY rowid", arguments
            ).fetchall()

    def records(self, method: str | None = None, task: str | None = None, dataset: str | None = None,
                settings: dict | None = None) -> list[Record]:
        """Stored records with their interval fields, settings and cost (not their units: :meth:`units`), filtered
        by any of method, task, dataset and one settings group (None: every group), in the order they were stored."""
        return [record_of_row(row) for row in self.provenance(method, task, dataset, settings)]

    def provenance(self, method: str | None = None, task: str | None = None, dataset: str | None = None,
                   settings: dict | None = None) -> list[dict]:
        """Stored rows with every column (fingerprint, code version, seed, time, extra, settings, cost)."""
        columns = ("method, task, dataset, subset, metric, value, n, fingerprint, code_version, seed, created, extra, identity, "
                   "ci_low, ci_high, ci_resamples, ci_resampled, ci_note, ci_seed, settings, cost")
        names = [name.strip() for name in columns.split(",")]
        out = []
        for row in self._select(columns, method, task, dataset, settings):
            item = dict(zip(names, row))
            for name in ("extra", "cost"):
                item[name] = json.loads(item[name]) if item[name] else None
            item["settings"] = json.loads(item["settings"])
            out.append(item)
        return out

    def delete(self, records: Iterable[Record]) -> int:
        """Remove the stored rows of exactly these records (each by its full key: method, task, dataset, subset,
        metric and settings group) and the per-unit arrays no row refers to any more; the number removed.
        Nothing else removes a row (``embedlab results --delete`` lists what it removes)."""
        keys = [(*(getattr(record, key) for key in _KEY), settings_json(record.settings)) for record in records]
        with self._connect() as connection:
            before = connection.total_changes
            connection.executemany("DELETE FROM results WHERE method = ? AND task = ? AND dataset = ? AND subset = ? "
                                   "AND metric = ? AND settings = ?", keys)
            removed = connection.total_changes - before
            unit_store.collect_garbage(connection)
            return removed
