"""Bad input is refused before any work, with a reason that names it: ids that cannot be stored, line ends
that would merge texts, inputs that are not regular files for runs that need an identity, a batch size of
zero, a bad solver-thread setting; user text in plot labels is drawn literally."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import embedlab
from embedlab.data import DataFormatError
from embedlab.data.corpus import Corpus
from embedlab.engines.runner import embed_corpus


@pytest.mark.parametrize(("name", "content", "message"), [
    ("big.jsonl", b'{"id": 1, "text": "a"}\n{"id": 9223372036854775808, "text": "b"}\n', r"big.jsonl:2: 'id' 9223372036854775808 is outside the 64-bit integer range"),
    ("small.jsonl", b'{"id": -9223372036854775809, "text": "a"}\n', r"small.jsonl:1: 'id' -9223372036854775809 is outside"),
    ("surrogate.jsonl", b'{"id": "a\\udc80", "text": "a"}\n', r"surrogate.jsonl:1: 'id' has a lone surrogate"),
    ("cr.txt", b"first text\rsecond text\rthird text\r", r"cr.txt:1: a carriage return inside the line"),
])
def test_bad_ids_and_line_ends_are_refused_by_the_scan(tmp_path, name, content, message):
    source = tmp_path / name
    source.write_bytes(content)
    with pytest.raises(DataFormatError, match=message):
        Corpus(source).scan(10)
    with pytest.raises(DataFormatError, match=message):
        Corpus(source).read_all()


def test_a_uint64_parquet_id_beyond_int64_is_refused(tmp_path):
    source = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2**64 - 1], type=pa.uint64()), "text": ["a", "b"]}), source)
    with pytest.raises(DataFormatError, match=r"ids.parquet: row 2: 'id' 18446744073709551615 is outside the 64-bit integer range"):
        Corpus(source).scan(10)


def test_crlf_line_ends_stay_fine(tmp_path):
    source = tmp_path / "crlf.txt"
    source.write_bytes(b"first text\r\nsecond text\r\n")
    assert Corpus(source).read_all()[1] == ["first text", "second text"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_non_regular_inputs_are_refused_for_a_resumable_run(tmp_path, kind):
    if kind == "fifo":
        source = tmp_path / "pipe"
        os.mkfifo(source)
    else:
        source = "/dev/zero"
    with pytest.raises(DataFormatError, match=r"is not a regular file \(a (named pipe|device)\).*write the texts to a file"):
        embed_corpus("random:minilm", source, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_batch_size_zero_is_refused():
    method = embedlab.load("random:minilm")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        method.encode(["a text"], batch_size=0)


def test_a_bad_solver_thread_setting_is_named(monkeypatch):
    from embedlab.evaluation.base import solver_threads

    monkeypatch.setenv("EMBEDLAB_SOLVER_THREADS", "many")
    with pytest.raises(ValueError, match=r"EMBEDLAB_SOLVER_THREADS='many' must be a positive whole number"):
        solver_threads()


def test_user_text_in_plot_labels_is_drawn_literally():
    from embedlab.evaluation.records import Record
    from embedlab.results.report import html_report

    records = [Record("m", "sts", r"my$\macro$data", "test", "spearman", 0.5, 3),
               Record("m2", "sts", r"my$\macro$data", "test", "spearman", 0.6, 3)]
    assert "<img" in html_report(records)  # mathtext would fail on the unknown \macro


def test_a_symlink_loop_and_a_closed_stdin_are_input_errors(tmp_path):
    import subprocess
    import sys

    from tests.faults.test_cli import REPO_ROOT

    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "EMBEDLAB_CACHE": str(tmp_path / "c")}
    finished = subprocess.run([sys.executable, "-m", "embedlab", "embed", "random:minilm", "--input", str(loop), "--out",
                               str(tmp_path / "o.npy")], capture_output=True, text=True, env=environment, timeout=300)
    assert finished.returncode == 2 and "symlink loop" in finished.stderr and "Traceback" not in finished.stderr, finished.stderr
    finished = subprocess.run([sys.executable, "-m", "embedlab", "embed", "random:minilm", "--input", "-", "--out",
                               str(tmp_path / "o.npy")], capture_output=True, text=True, env=environment, timeout=300,
                              stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
    assert finished.returncode == 2 and "standard input is closed" in finished.stderr, finished.stderr
