"""Tests for the shared-data loaders (embedlab.data.sts, paraphrase, senteval, clustering, summeval over data.reading): row counts of the shared data and error messages."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from embedlab.data import DataFormatError, clustering, paraphrase, senteval, sts, summeval
from embedlab.runtime.settings import data_path


def test_sts_years_skip_unscored_pairs() -> None:
    subsets = {s.subset: s for s in sts.sts_year("sts15")}
    assert len(subsets["answers-forums"]) == 375  # 2,000 input lines, 375 scored
    assert sum(len(s) for s in subsets.values()) == 3000
    assert np.all((subsets["belief"].scores >= 0) & (subsets["belief"].scores <= 5))
    assert len(sts.sts_year("sts13")) == 3  # no SMT subset


def test_shared_sets_have_readme_sizes() -> None:
    assert len(sts.stsb("test")) == 1379
    sick = sts.sick_entailment("trial")
    assert len(sick) == 500 and set(np.unique(sick.labels)) == {0, 1, 2}
    glue = paraphrase.mrpc_glue_train()
    assert len(glue) == 3668 and int(glue.labels.sum()) == 2474
    assert int(paraphrase.qqp().labels.sum()) == 3711  # quoted questions spanning lines are read whole
    sst5 = senteval.sst(True, "dev")
    assert len(sst5) == 1101 and set(np.unique(sst5.labels)) == set(range(5))
    trec = senteval.trec("test")
    assert trec.texts[0] == "How far is it from Denver to Aspen ?" and trec.label_names[trec.labels[0]] == "NUM"
    tweet = clustering.clustering_set("tweet")
    assert len(tweet) == 2472 and len(tweet.label_names) == 89
    assert len(senteval.senteval_binary("cr")) == 3775
    items = summeval.summeval()
    assert len({i.doc_id for i in items}) == 100 and all(len(i.references) == 11 for i in items)


def test_missing_file_names_path_and_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as error:
        sts.stsb("test")
    assert "sts-test.csv" in str(error.value) and str(tmp_path) in str(error.value)


def test_altered_copy_fails_row_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = data_path("sts", "STSBenchmark", "sts-dev.csv")
    target = tmp_path / "sts" / "STSBenchmark" / "sts-dev.csv"
    target.parent.mkdir(parents=True)
    target.write_text("".join(source.read_text().splitlines(keepends=True)[:-3]))
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    with pytest.raises(DataFormatError, match="1497 rows.*README says 1500"):
        sts.stsb("dev")


def test_bad_line_names_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "sts" / "STSBenchmark"
    folder.mkdir(parents=True)
    shutil.copy(data_path("sts", "STSBenchmark", "sts-test.csv"), folder / "sts-test.csv")
    lines = (folder / "sts-test.csv").read_text().splitlines(keepends=True)
    lines[4] = lines[4].replace("\t", " ", 6)
    (folder / "sts-test.csv").write_text("".join(lines))
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    with pytest.raises(DataFormatError, match=r"sts-test.csv, line 5"):
        sts.stsb("test")
