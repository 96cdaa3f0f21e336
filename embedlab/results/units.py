"""Per-unit scores in the results database: each array one ``.npy`` blob, stored once by its content.

A record's :class:`~embedlab.evaluation.records.UnitScores` become a small JSON description on its row
(what was resampled, the statistic, and the SHA-256 digest of each array) plus one row per distinct array
in the ``unit_arrays`` table. Arrays are content-addressed, so the gold scores that every method and
every correlation metric of a dataset share are stored once. Arrays of 1/0 (correctness, labels) are
stored as booleans (one byte a unit); blobs are written with ``allow_pickle=False`` and read with
``np.load(allow_pickle=False)``, so a damaged or foreign database can never run code.
"""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3

import numpy as np

from embedlab.evaluation.records import UnitScores

TABLE = """
CREATE TABLE IF NOT EXISTS unit_arrays (
    digest TEXT PRIMARY KEY,
    npy BLOB NOT NULL
);
"""


def _compact(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype != np.bool_ and values.size and np.isin(values, (0, 1)).all():
        return values.astype(np.bool_)
    return values


def _npy(values: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(_compact(values)), allow_pickle=False)
    return buffer.getvalue()


def write(connection: sqlite3.Connection, units: UnitScores | None) -> str | None:
    """Store ``units``' arrays (those not stored yet) and return the JSON that describes them (None: no units)."""
    if units is None:
        return None
    digests = {}
    for name, values in units.arrays.items():
        blob = _npy(values)
        digest = hashlib.sha256(blob).hexdigest()
        connection.execute("INSERT OR IGNORE INTO unit_arrays (digest, npy) VALUES (?, ?)", (digest, blob))
        digests[name] = digest
    return json.dumps({"resampled": units.resampled, "statistic": units.statistic, "arrays": digests}, sort_keys=True)


def read(connection: sqlite3.Connection, description: str | None) -> UnitScores | None:
    """The units a row's JSON describes (None for a row without units)."""
    if not description:
        return None
    about = json.loads(description)
    arrays = {}
    for name, digest in about["arrays"].items():
        row = connection.execute("SELECT npy FROM unit_arrays WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            raise sqlite3.DatabaseError(f"per-unit array {name} ({digest[:12]}) of a stored record is missing")
        arrays[name] = np.load(io.BytesIO(row[0]), allow_pickle=False)
    return UnitScores(about["resampled"], about["statistic"], arrays)


def collect_garbage(connection: sqlite3.Connection) -> None:
    """Drop the arrays no stored row refers to any more (after rows are replaced or deleted)."""
    connection.execute("DELETE FROM unit_arrays WHERE digest NOT IN "
                       "(SELECT arrays.value FROM results, json_each(results.units, '$.arrays') AS arrays WHERE results.units IS NOT NULL)")
