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
from embedlab.runtime import settings
from embedlab.evaluation.records import Record
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
    PRIMARY KEY (method, task, dataset, subset, metric)
);
CREATE INDEX IF NOT EXISTS results_by_task ON results (task, dataset);
"""


# PRAGMA user_version of the current layout. 1: classification accuracies are fractions 0–1 (the one
# unit convention, evaluation/base.py UNITS); version 0 files stored them in percent. 2: each row holds
# the identity of the method that computed it (rows of older files have none and are never reused).
SCHEMA_VERSION = 2


class NewerDatabaseError(sqlite3.DatabaseError):
    """A results database written by a newer embedlab: its layout is not one this version can read."""


def _migrate(connection: sqlite3.Connection, existed: bool) -> None:
    """Bring a database written by an older embedlab to :data:`SCHEMA_VERSION`, in the same transaction,
    so that stored results are never reused in another unit than fresh ones."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise NewerDatabaseError(f"written by a newer embedlab (layout version {version}; this embedlab reads up to "
                                 f"{SCHEMA_VERSION}); upgrade embedlab or give another --db")
    if existed and version < 2:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(results)")}
        if "identity" not in columns:
            connection.execute("ALTER TABLE results ADD COLUMN identity TEXT")
    if existed and version < 1:
        connection.execute("UPDATE results SET value = value / 100 WHERE task = 'classification' "
                           "AND metric IN ('accuracy', 'dev_accuracy')")
    if version < SCHEMA_VERSION:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def default_path() -> Path:
    """``$EMBEDLAB_RESULTS`` or ``./embedlab_results.sqlite``."""
    return settings.results_path(DEFAULT_FILE)


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
            connection.executescript(_SCHEMA)
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
        """Store ``records`` (all at once, in one transaction) with their provenance and the identity of
        the method that computed them (without one, they are stored but never reused)."""
        now = time.time()
        version = code_version()
        extra_text = json.dumps(extra, sort_keys=True) if extra else None
        rows = []
        for index, record in enumerate(records):
            if not isinstance(record, Record):
                raise InputTypeError(f"record {index} is a {type(record).__name__}, not an embedlab.evaluation.records.Record")
            value = float(record.value)
            if math.isnan(value):  # SQLite would store NULL, which the table refuses: say which record
                raise InputError(f"record {index} ({record.task}/{record.dataset} {record.subset} {record.metric}) is NaN; "
                                 "the results database stores numbers only")
            rows.append((record.method, record.task, record.dataset, record.subset, record.metric, value,
                         int(record.n), str(fingerprint), version, int(seed), now, extra_text, identity))
        with self._connect() as connection:
            connection.executemany(
                "INSERT OR REPLACE INTO results (method, task, dataset, subset, metric, value, n, fingerprint, code_version, "
                "seed, created, extra, identity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

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
        """Stored records, filtered by any of method, task and dataset, in the order they were stored."""
        rows = self._select("method, task, dataset, subset, metric, value, n", method, task, dataset)
        return [Record(*row) for row in rows]

    def provenance(self, method: str | None = None, task: str | None = None, dataset: str | None = None) -> list[dict]:
        """Stored rows with every column (fingerprint, code version, seed, time, extra)."""
        columns = "method, task, dataset, subset, metric, value, n, fingerprint, code_version, seed, created, extra, identity"
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
            return cursor.rowcount
