"""Stored results follow what was computed: the results database reuses a stored (method, task, dataset)
only when the method's identity (canonical spec, model content fingerprint, fitted-state hash) is the one
that computed it; rows without an identity (an older database) are never reused; every file that changes
what a model computes is part of its fingerprint."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest

import embedlab
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.models.fingerprints import model_fingerprint
from embedlab.models.loading import resolve_model_path
from embedlab.results.database import ResultsDB
from embedlab.runtime.memo import clear


@pytest.fixture
def sts_file(tmp_path, sts_test_rows):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{a}\t{b}\t{score}\n" for score, a, b in sts_test_rows[:24]), encoding="utf-8")
    return path


def _spearman(run) -> float:
    return next(r.value for r in run.records if r.metric == "spearman")


def test_fitted_states_are_told_apart_in_the_results_database(tmp_path, sts_file, sts_test_rows, isolated_cache):
    quiet = {"log": lambda message: None}
    db = ResultsDB(tmp_path / "results.sqlite")
    corpus_a = [a for _, a, _ in sts_test_rows[100:140]]
    corpus_b = [b for _, _, b in sts_test_rows[300:303]]
    (task,) = parse_tasks(f"sts:@{sts_file}")
    fitted_a = embedlab.load("minilm:post=zscore").fit(corpus_a)
    fitted_b = embedlab.load("minilm:post=zscore").fit(corpus_b)
    unfitted = embedlab.load("minilm:post=zscore")
    without_db = {name: _spearman(evaluate([method], [task], **quiet)) for name, method in
                  (("a", fitted_a), ("b", fitted_b), ("none", unfitted))}
    assert len(set(without_db.values())) == 3  # three different methods
    for name, method in (("a", fitted_a), ("b", fitted_b), ("none", unfitted)):
        run = evaluate([method], [task], db=db, **quiet)
        assert not run.reused, f"fit {name} reused another fit's stored records"
        assert _spearman(run) == without_db[name]
    again = evaluate([unfitted], [task], db=db, **quiet)  # the same identity: reused
    assert again.reused and _spearman(again) == without_db["none"]


def test_rows_without_an_identity_are_not_reused(tmp_path, sts_file, isolated_cache):
    quiet = {"log": lambda message: None}
    path = tmp_path / "results.sqlite"
    (task,) = parse_tasks(f"sts:@{sts_file}")
    method = embedlab.load("random:minilm")
    first = evaluate([method], [task], db=ResultsDB(path), **quiet)
    with sqlite3.connect(path) as connection:  # what an older embedlab stored: no identity, a wrong value
        connection.execute("UPDATE results SET identity = NULL, value = 0.5")
    again = evaluate([method], [task], db=ResultsDB(path), **quiet)
    assert not again.reused
    assert _spearman(again) == _spearman(first)


def _copy_minilm(target):
    shutil.copytree(resolve_model_path("minilm"), target)
    return target


@pytest.mark.parametrize("name", ["sentence_bert_config.json", "modules.json", "1_Pooling/config.json"])
def test_every_file_that_changes_the_computation_is_fingerprinted(tmp_path, name):
    folder = _copy_minilm(tmp_path / "model")
    before = model_fingerprint(folder)
    path = folder / name
    assert path.is_file()
    path.write_text(path.read_text().rstrip().removesuffix("}") + ', "changed": 1}\n')
    assert model_fingerprint(folder) != before


def test_a_local_model_whose_weights_change_at_the_same_path_is_not_reused(tmp_path, sts_file, isolated_cache):
    from embedlab.cli.app import main

    folder = _copy_minilm(tmp_path / "model")
    db = tmp_path / "results.sqlite"
    arguments = ["eval", f"pooled:{folder}", "--tasks", f"sts:@{sts_file}", "--db", str(db), "--quiet"]
    assert main(arguments) == 0
    first = {r.metric: r.value for r in ResultsDB(db).records()}
    # same path, same file names: the weights are scaled, the result must follow
    from safetensors.numpy import load_file, save_file

    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    save_file({key: (value * np.float32(0.5) if value.dtype == np.float32 else value) for key, value in tensors.items()}, weights)
    clear()
    assert main(arguments) == 0
    second = {r.metric: r.value for r in ResultsDB(db).records()}
    assert second["spearman"] != first["spearman"]


def test_a_database_from_a_newer_embedlab_is_refused_with_its_version(tmp_path):
    path = tmp_path / "results.sqlite"
    ResultsDB(path)
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(sqlite3.DatabaseError, match=r"results.sqlite: written by a newer embedlab \(layout version 7"):
        ResultsDB(path)
    with sqlite3.connect(path) as connection:  # nothing was changed in it
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 7
