"""Tests for embedlab.results.database: storing, filtering, replacing and provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.evaluation.records import Record
from embedlab.results.database import SCHEMA_VERSION, ResultsDB, default_path


def _records(method: str = "minilm", value: float = 0.5) -> list[Record]:
    return [
        Record(method, "sts", "stsb", "test", "spearman", value, 1379),
        Record(method, "sts", "stsb", "test", "pearson", value + 0.1, 1379),
        Record(method, "pairs", "mrpc", "glue-train", "error", 0.25, 2953956),
    ]


def test_add_has_records_roundtrip(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path / "r.sqlite")
    assert not db.has("minilm", "sts", "stsb")
    db.add(_records(), fingerprint="abc", seed=3, extra={"note": "x"})
    assert db.has("minilm", "sts", "stsb")
    assert not db.has("minilm", "sts", "sick")
    assert not db.has("other", "sts", "stsb")
    stored = db.records(method="minilm", task="sts")
    assert {r.metric: r.value for r in stored} == {"spearman": 0.5, "pearson": pytest.approx(0.6)}
    assert all(isinstance(r, Record) and r.n == 1379 for r in stored)
    assert len(db.records()) == 3
    assert [r.task for r in db.records(dataset="mrpc")] == ["pairs"]
    row = db.provenance(task="pairs")[0]
    assert row["fingerprint"] == "abc" and row["seed"] == 3 and row["extra"] == {"note": "x"}
    assert row["code_version"].startswith("0.") and row["created"] > 0


def test_readd_replaces_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultsDB(path).add(_records(value=0.5), fingerprint="abc")
    ResultsDB(path).add(_records(value=0.7), fingerprint="abc")
    reopened = ResultsDB(path)
    spearman = [r for r in reopened.records() if r.metric == "spearman"]
    assert len(spearman) == 1 and spearman[0].value == pytest.approx(0.7)
    assert reopened.delete(reopened.records(method="minilm", task="sts")) == 2
    assert not reopened.has("minilm", "sts", "stsb")


def test_default_path_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDLAB_RESULTS", str(tmp_path / "elsewhere.sqlite"))
    assert default_path() == tmp_path / "elsewhere.sqlite"
    db = ResultsDB()
    assert db.path == tmp_path / "elsewhere.sqlite" and db.path.exists()
    monkeypatch.delenv("EMBEDLAB_RESULTS")
    monkeypatch.chdir(tmp_path)
    assert default_path() == tmp_path / "embedlab_results.sqlite"


def test_rejects_non_records(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="record 0"):
        ResultsDB(tmp_path / "r.sqlite").add([("minilm", "sts")], fingerprint="x")  # type: ignore[list-item]


def test_a_database_of_percent_accuracies_is_migrated_to_fractions(tmp_path: Path) -> None:
    """Version 0 files stored classification accuracy in percent; opening one converts them once, so that
    reused results and fresh ones share the unit convention (evaluation/base.py UNITS)."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    ResultsDB(path).add([Record("m", "classification", "trec", "test", "accuracy", 89.2, 500),
                         Record("m", "classification", "trec", "test", "dev_accuracy", 80.5, 500),
                         Record("m", "clustering", "tweet", "all", "accuracy", 0.5887, 2472)], fingerprint="f")
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 0")  # as an older embedlab left it
    for _ in range(2):  # converted once, not on every open
        values = {(r.task, r.metric): r.value for r in ResultsDB(path).records()}
        assert values == {("classification", "accuracy"): pytest.approx(0.892), ("classification", "dev_accuracy"): pytest.approx(0.805),
                          ("clustering", "accuracy"): 0.5887}
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


_VERSION_2_TABLE = """CREATE TABLE results (method TEXT NOT NULL, task TEXT NOT NULL, dataset TEXT NOT NULL, subset TEXT NOT NULL,
    metric TEXT NOT NULL, value REAL NOT NULL, n INTEGER NOT NULL, fingerprint TEXT NOT NULL, code_version TEXT NOT NULL,
    seed INTEGER NOT NULL, created REAL NOT NULL, extra TEXT, identity TEXT, PRIMARY KEY (method, task, dataset, subset, metric))"""


def test_a_database_from_before_intervals_stays_readable_without_them(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "v2.sqlite"
    with sqlite3.connect(path) as connection:  # the layout embedlab wrote before intervals (user_version 2)
        connection.execute(_VERSION_2_TABLE)
        connection.execute("INSERT INTO results VALUES ('m', 'sts', 'stsb', 'test', 'spearman', 0.82, 1379, 'f', 'v', 0, 0, NULL, 'i')")
        connection.execute("PRAGMA user_version = 2")
    db = ResultsDB(path)
    (old,) = db.records()
    assert (old.value, old.interval()) == (0.82, dict.fromkeys(("ci_low", "ci_high", "ci_resamples", "ci_resampled", "ci_note")))
    assert db.units("m", "sts", "stsb") == {} and db.interval_draws("m", "sts", "stsb") == set()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4


def test_units_are_stored_once_as_arrays_and_intervals_change_in_place(tmp_path: Path) -> None:
    import sqlite3

    import numpy as np

    from embedlab.evaluation.records import UnitScores

    gold = np.linspace(0, 5, 40)
    def scored(method: str, metric: str) -> Record:
        units = UnitScores("pairs", metric, {"predicted": gold * (1 + len(method)), "gold": gold})
        return Record(method, "sts", "stsb", "test", metric, 1.0, 40, units=units, ci_low=0.9, ci_high=1.0,
                      ci_resamples=100, ci_resampled="pairs")

    db = ResultsDB(tmp_path / "r.sqlite")
    db.add([scored("a", "spearman"), scored("a", "pearson")], fingerprint="f", seed=4)
    db.add([scored("bb", "spearman"), Record("bb", "sts", "stsb", "test", "kendall_b", 0.7, 40, ci_note="why")], fingerprint="f")
    with sqlite3.connect(db.path) as connection:  # gold once for everyone, each method's predictions once
        assert connection.execute("SELECT COUNT(*) FROM unit_arrays").fetchone()[0] == 3
    units = db.units("a", "sts", "stsb")
    assert set(units) == {("test", "spearman"), ("test", "pearson")}
    np.testing.assert_array_equal(units[("test", "pearson")].arrays["gold"], gold)
    assert units[("test", "pearson")].statistic == "pearson" and units[("test", "pearson")].resampled == "pairs"
    assert db.interval_draws("a", "sts", "stsb") == {(100, 4)}
    assert {r.metric: r.ci_note for r in db.records(method="bb")} == {"spearman": None, "kendall_b": "why"}
    # recomputed in place: the same rows, new bounds and draws
    moved = [Record("a", "sts", "stsb", "test", "spearman", 1.0, 40, ci_low=0.5, ci_high=0.6, ci_resamples=200, ci_resampled="pairs")]
    db.set_intervals(moved, seed=9)
    after = {r.metric: r for r in db.records(method="a")}
    assert len(after) == 2 and (after["spearman"].ci_low, after["spearman"].ci_resamples) == (0.5, 200)
    assert db.interval_draws("a", "sts", "stsb") == {(200, 9), (100, 4)}
    db.delete(db.records(method="bb"))  # its predictions are no longer referred to by any row
    with sqlite3.connect(db.path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM unit_arrays").fetchone()[0] == 2


# A version 3 database as the c9e6ee2 code wrote it (ResultsDB.add, then sqlite3's iterdump): a retrieval row
# stored with non-default settings (in extra) and per-unit scores, a row of default settings, an Eq. 3 row.
_VERSION_3_DUMP = """
CREATE TABLE results (method TEXT NOT NULL, task TEXT NOT NULL, dataset TEXT NOT NULL, subset TEXT NOT NULL,
    metric TEXT NOT NULL, value REAL NOT NULL, n INTEGER NOT NULL, fingerprint TEXT NOT NULL, code_version TEXT NOT NULL,
    seed INTEGER NOT NULL, created REAL NOT NULL, extra TEXT, identity TEXT, ci_low REAL, ci_high REAL, ci_resamples INTEGER,
    ci_resampled TEXT, ci_note TEXT, ci_seed INTEGER, units TEXT, PRIMARY KEY (method, task, dataset, subset, metric));
INSERT INTO "results" VALUES('m','retrieval','beir@1a2b3c4d','all','ndcg@10',0.625,4,'f','0.1.0',0,1.79588417023864173891e+09,'{"settings": {"k": "10", "search": "hnsw"}}','id-m',0.25,1.0,10,'queries',NULL,0,'{"arrays": {"score": "89079cd7ffa0c1bfbbc0d1be7249db5a3d825ae99c0e1b0b7e59e2400a7fc261"}, "resampled": "queries", "statistic": "mean"}');
INSERT INTO "results" VALUES('m','sts','stsb','test','spearman',0.8,1379,'f','0.1.0',0,1.79588417029439496993e+09,NULL,'id-m',NULL,NULL,NULL,NULL,'why',NULL,NULL);
INSERT INTO "results" VALUES('m','triplets','t@00000000','vs ref','intersection',0.5,3,'f','0.1.0',0,1.79588417031623840333e+09,'{"reference": "ref"}','pair',NULL,NULL,NULL,NULL,NULL,NULL,NULL);
CREATE TABLE unit_arrays (digest TEXT PRIMARY KEY, npy BLOB NOT NULL);
INSERT INTO "unit_arrays" VALUES('89079cd7ffa0c1bfbbc0d1be7249db5a3d825ae99c0e1b0b7e59e2400a7fc261',X'934E554D5059010076007B276465736372273A20273C6638272C2027666F727472616E5F6F72646572273A2046616C73652C20277368617065273A2028342C292C207D2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020200A000000000000F03F000000000000E03F0000000000000000000000000000F03F');
CREATE INDEX results_by_task ON results (task, dataset);
PRAGMA user_version = 3;
"""


def test_a_version_3_database_is_rebuilt_with_its_settings_in_the_key(tmp_path: Path) -> None:
    import sqlite3

    import numpy as np

    path = tmp_path / "v3.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(_VERSION_3_DUMP)
    db = ResultsDB(path)
    lifted = {"k": "10", "search": "hnsw"}
    assert [(r.task, r.settings, r.value) for r in db.records()] == [  # the stored order kept
        ("retrieval", lifted, 0.625), ("sts", {}, 0.8), ("triplets", {}, 0.5)]
    (retrieval,) = db.records(task="retrieval")
    assert (retrieval.ci_low, retrieval.ci_high, retrieval.ci_resamples, retrieval.cost) == (0.25, 1.0, 10, None)
    units = db.units("m", "retrieval", "beir@1a2b3c4d", settings=lifted)  # per-unit scores kept, now under the group
    np.testing.assert_array_equal(units[("all", "ndcg@10")].arrays["score"], [1.0, 0.5, 0.0, 1.0])
    assert db.units("m", "retrieval", "beir@1a2b3c4d") == {} and not db.has("m", "retrieval", "beir@1a2b3c4d")
    assert db.identities("m", "retrieval", "beir@1a2b3c4d", lifted) == {"id-m"}
    assert db.provenance(task="triplets")[0]["extra"] == {"reference": "ref"}
    # the defaults group of the same (method, task, dataset, subset, metric) is a row of its own now
    db.add([Record("m", "retrieval", "beir@1a2b3c4d", "all", "ndcg@10", 0.5, 4)], fingerprint="f", identity="id-m")
    assert db.settings_groups("m", "retrieval", "beir@1a2b3c4d") == [lifted, {}]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 4
        key = [row[1] for row in connection.execute("PRAGMA table_info(results)") if row[5]]
        assert key == ["method", "task", "dataset", "subset", "metric", "settings"]


def test_each_settings_group_keeps_its_rows_and_cost(tmp_path: Path) -> None:
    from dataclasses import replace

    db = ResultsDB(tmp_path / "r.sqlite")
    cost = {"encode_seconds": 1.5, "texts": 3}
    plain = Record("m", "retrieval", "f", "all", "ndcg@10", 0.5, 3, cost=cost)
    cut = replace(plain, value=0.6, settings={"search": "hnsw", "k": "10"}, cost=None)
    db.add([plain], fingerprint="f")
    db.add([cut], fingerprint="f")
    db.add([replace(cut, value=0.7)], fingerprint="f")  # the same group: replaced, not added
    assert [(r.settings, r.value, r.cost) for r in db.records()] == [({}, 0.5, cost), ({"k": "10", "search": "hnsw"}, 0.7, None)]
    assert [r.value for r in db.records(settings={"k": "10", "search": "hnsw"})] == [0.7]  # key order is no part of it
    assert [r.value for r in db.records(settings={})] == [0.5]
    assert db.has("m", "retrieval", "f", {"k": "10", "search": "hnsw"}) and not db.has("m", "retrieval", "f", {"k": "10"})
    assert db.delete(db.records(settings={})) == 1
    assert [r.settings for r in db.records()] == [{"k": "10", "search": "hnsw"}]
