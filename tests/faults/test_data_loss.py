"""Nothing the user had is lost: ``embed --out`` that names the input (however spelled) is refused before
anything is written; ``report --out`` is written atomically (a full disk leaves the old report whole) and
replaces a symlink instead of writing through it into its target; every other results file is atomic too."""

from __future__ import annotations

import errno
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embedlab.evaluation.records import Record
from embedlab.results.database import ResultsDB
from embedlab.results.report import write_report
from tests.faults.test_cli import assert_one_line_error, embedlab_cli, environment  # noqa: F401 - the fixture


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"text": ["A man plays.", "A woman reads.", "Dogs run."]}), path)
    return path


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink", "hardlink"])
def test_embed_out_naming_the_input_is_refused(environment, tmp_path, corpus, spelling):  # noqa: F811
    before = corpus.read_bytes()
    out = {"same": corpus, "dotted": tmp_path / "." / "corpus.parquet", "symlink": tmp_path / "link.parquet",
           "hardlink": tmp_path / "hard.parquet"}[spelling]
    if spelling == "symlink":
        out.symlink_to(corpus)
    if spelling == "hardlink":
        os.link(corpus, out)
    finished = embedlab_cli(environment, "embed", "random:minilm", "--input", corpus, "--out", out)
    assert_one_line_error(finished, 2, "is the input")
    assert corpus.read_bytes() == before


def test_embed_out_folder_that_would_hold_the_input_is_refused(environment, tmp_path):  # noqa: F811
    folder = tmp_path / "run"
    folder.mkdir()
    source = folder / "manifest.json"  # a name the run writes
    source.write_text('{"text": "A man plays."}\n')
    finished = embedlab_cli(environment, "embed", "random:minilm", "--input", source, "--input-format", "jsonl",
                            "--out", folder, "--overwrite")
    assert_one_line_error(finished, 2, "is the input")
    assert source.read_text() == '{"text": "A man plays."}\n'


def _records():
    return [Record("m", "sts", "stsb", "test", "spearman", 0.5, 3)]


def test_a_full_disk_leaves_the_old_report_whole(tmp_path, monkeypatch):
    out = tmp_path / "report.html"
    out.write_text("<html>the old report</html>")

    def full_disk_writev(descriptor, buffers):
        os.write(descriptor, bytes(buffers[0][:100]))
        raise OSError(errno.ENOSPC, "No space left on device")

    original_write_text = type(out).write_text

    def full_disk_write_text(self, data, *args, **kwargs):  # what a direct write does on a full disk
        original_write_text(self, data[:20_000], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "writev", full_disk_writev)
    monkeypatch.setattr(type(out), "write_text", full_disk_write_text)
    with pytest.raises(OSError, match="No space left"):
        write_report(_records(), out)
    monkeypatch.undo()
    assert out.read_text() == "<html>the old report</html>"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.html"]  # no temporary left


def test_report_out_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "precious.html"
    target.write_text("keep me")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    write_report(_records(), link)
    assert target.read_text() == "keep me"
    assert not link.is_symlink() and "<html" in link.read_text()


def test_report_cli_replaces_a_symlink(environment, tmp_path):  # noqa: F811
    db = ResultsDB(tmp_path / "results.sqlite")
    db.add(_records(), fingerprint="f")
    target = tmp_path / "precious.html"
    target.write_text("keep me")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    finished = embedlab_cli(environment, "report", "--db", db.path, "--out", link)
    assert finished.returncode == 0, finished.stderr
    assert target.read_text() == "keep me" and not link.is_symlink()


def test_other_results_files_are_atomic(tmp_path, monkeypatch):
    """ALIGN-SIM's report and per-method files, the perturbation sets and explain's heatmap go through
    the atomic writer (a failure leaves no partial file under the final name)."""
    import numpy as np

    from embedlab.evaluation.alignsim import task
    from embedlab.evaluation.alignsim.task import MethodResult
    from embedlab.results.alignsim_report import write_report as alignsim_write_report
    from embedlab.runtime.cache import atomic

    written = []
    original = atomic.atomic_write_bytes
    recording = lambda path, payload: (written.append(path.name), original(path, payload))  # noqa: E731
    monkeypatch.setattr(task, "atomic_write_bytes", recording)  # a caller that writes bytes itself
    monkeypatch.setattr(atomic, "atomic_write_bytes", recording)  # atomic_write_text and save_figure
    result = MethodResult("random:minilm", [Record("random:minilm", "alignsim", "mrpc", "c1", "sim_pass_avg", 0.5, 3)])
    result.margins[("mrpc", "c1", "sim")] = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    result.save(tmp_path / "methods")
    alignsim_write_report([result], tmp_path / "report", ["mrpc"], {})
    assert {"random_minilm.json", "random_minilm.npz", "report.md"} <= set(written)
    assert any(name.endswith(".png") for name in written)


def test_embed_out_dash_is_refused_not_a_folder_named_dash(environment, tmp_path, corpus):  # noqa: F811
    finished = embedlab_cli(environment, "embed", "random:minilm", "--input", corpus, "--out", "-", cwd=tmp_path)
    assert_one_line_error(finished, 2, "--out -")
    assert not (tmp_path / "-").exists()
