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
from embedlab.evaluation.records import CI_KEYS, RECORD_KEYS, Record, UnitScores
from embedlab.results import units as unit_store
from embedlab.runtime.settings import results_path
from embedlab.version import code_version

DEFAULT_FILE = "embedlab_results.sqlite"

_SCHEMA = """
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
    PRIMARY KEY (method, task, dataset, subset, metric)
);
CREATE INDEX IF NOT EXISTS results_by_task ON results (task, dataset);
"""


# PRAGMA user_version of the current layout. 1: classification accuracies are fractions 0–1 (the one
# unit convention, evaluation/base.py UNITS); version 0 files stored them in percent. 2: each row holds
# the identity of the method that computed it (rows of older files have none and are never reused).
# 3: confidence-interval columns and per-unit scores (rows of older files have neither: shown with no interval).
SCHEMA_VERSION = 3
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
    if version < SCHEMA_VERSION:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


_KEY = ("method", "task", "dataset", "subset", "metric")


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
        (drawn from ``seed``) and their per-unit scores."""
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
                     *_interval_row(record, seed), unit_store.write(connection, record.units)) for record in records]
            connection.executemany(
                "INSERT OR REPLACE INTO results (method, task, dataset, subset, metric, value, n, fingerprint, code_version, "
                "seed, created, extra, identity, ci_low, ci_high, ci_resamples, ci_resampled, ci_note, ci_seed, units) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            unit_store.collect_garbage(connection)

    def set_intervals(self, records: Iterable[Record], seed: int) -> None:
        """Replace the stored interval fields of these records' rows with theirs (drawn from ``seed``):
        the interval is recomputed in place, never a second row."""
        rows = [(*_interval_row(record, seed), *(getattr(record, key) for key in _KEY)) for record in records]
        with self._connect() as connection:
            connection.executemany(
                "UPDATE results SET ci_low = ?, ci_high = ?, ci_resamples = ?, ci_resampled = ?, ci_note = ?, ci_seed = ? "
                "WHERE method = ? AND task = ? AND dataset = ? AND subset = ? AND metric = ?", rows)

    def interval_draws(self, method: str, task: str, dataset: str) -> set[tuple[int | None, int | None]]:
        """The (B, seed) pairs the stored intervals of this (method, task, dataset) were drawn with, over the
        rows that keep per-unit scores ((None, None): never computed)."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT DISTINCT ci_resamples, ci_seed FROM results WHERE method = ? AND task = ? AND dataset = ? "
                "AND units IS NOT NULL", (method, task, dataset)).fetchall()
        return {tuple(row) for row in rows}

    def units(self, method: str, task: str, dataset: str) -> dict[tuple[str, str], UnitScores]:
        """The stored per-unit scores of one (method, task, dataset), by (subset, metric)."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT subset, metric, units FROM results WHERE method = ? AND task = ? AND dataset = ? AND units IS NOT NULL",
                (method, task, dataset)).fetchall()
            return {(subset, metric): unit_store.read(connection, about) for subset, metric, about in rows}

    def has(self, method: str, task: str, dataset: str) -> bool:
        """Whether results for this (method, task, dataset) are stored."""
        with self._connect() as connection:
            row = connection.execute(
                "SELECT 1 FROM results WHERE method = ? AND task = ? AND dataset = ? LIMIT 1", (method, task, dataset)
            ).fetchone()
        return row is not None

    def identities(self, method: str, task: str, dataset: str) -> set[str | None]:
        """The identities the stored rows of this (method, task, dataset) were computed under (None: unknown);
        Eq. 3 intersection rows (subset ``vs …``) carry their pair's identity and are left out."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT DISTINCT identity FROM results WHERE method = ? AND task = ? AND dataset = ? AND subset NOT LIKE 'vs %'",
                (method, task, dataset)
            ).fetchall()
        return {row[0] for row in rows}

    def settings(self, method: str, task: str, dataset: str) -> dict | None:
        """The task settings a stored (method, task, dataset) was computed with (``{}``: the task's defaults),
        or None when nothing is stored. Eq. 3 intersection rows (subset ``vs …``) carry no settings."""
        with self._connect() as connection:
            row = connection.execute(
                "SELECT extra FROM results WHERE method = ? AND task = ? AND dataset = ? AND subset NOT LIKE 'vs %' "
                "LIMIT 1", (method, task, dataset)
            ).fetchone()
        if row is None:
            return None
        return (json.loads(row[0]) if row[0] else {}).get("settings", {})

    def _select(self, columns: str, method: str | None, task: str | None, dataset: str | None) -> list[tuple]:
        clauses, arguments = [], []
        for column, value in (("method", method), ("task", task), ("dataset", dataset)):
            if value is not None:
                clauses.append(f"{column} = ?")
                arguments.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._connect() as connection:
            return connection.execute(
                f"SELECT {columns} FROM results{where} ORDER BY rowid", arguments
            ).fetchall()

    def records(self, method: str | None = None, task: str | None = None, dataset: str | None = None) -> list[Record]:
        """Stored records with their interval fields (not their units: :meth:`units`), filtered by any of
        method, task and dataset, in the order they were stored."""
        rows = self._select(", ".join((*RECORD_KEYS, *CI_KEYS)), method, task, dataset)
        return [Record(*row[:len(RECORD_KEYS)], **dict(zip(CI_KEYS, row[len(RECORD_KEYS):]))) for row in rows]

    def provenance(self, method: str | None = None, task: str | None = None, dataset: str | None = None) -> list[dict]:
        """Stored rows with every column (fingerprint, code version, seed, time, extra)."""
        columns = ("method, task, dataset, subset, metric, value, n, fingerprint, code_version, seed, created, extra, identity, "
                   "ci_low, ci_high, ci_resamples, ci_resampled, ci_note, ci_seed")
        names = [name.strip() for name in columns.split(",")]
        out = []
        for row in self._select(columns, method, task, dataset):
            item = dict(zip(names, row))
            item["extra"] = json.loads(item["extra"]) if item["extra"] else None
            out.append(item)
        return out

    def delete(self, method: str, task: str, dataset: str) -> int:
        """Remove the stored rows of one (method, task, dataset); the number removed."""
        with self._connect() as connection:
            cursor = connection.execute(
                "DELETE FROM results WHERE method = ? AND task = ? AND dataset = ?", (method, task, dataset)
            )
            unit_store.collect_garbage(connection)
            return cursor.rowcount
