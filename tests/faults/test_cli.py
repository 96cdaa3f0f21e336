"""The command line under bad input and faults: one line ``embedlab COMMAND: error: ...``, no traceback,
and an exit status that says whose fault it was (2: the command line or an input file, 1: the machine,
130: Ctrl-C).

Every case runs ``python -m embedlab`` in a subprocess on real files with real faults.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import embedlab
from embedlab.evaluation.records import Record
from embedlab.results.database import ResultsDB
import preloaded  # tests/preloaded.py: child processes forked from a preloaded Python

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> dict[str, str]:
    """Offline, this checkout first on the path, caches and the default results file in a temporary folder."""
    folder = tmp_path_factory.mktemp("cli-faults")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "EMBEDLAB_CACHE": str(folder / "cache"),
            "EMBEDLAB_RESULTS": str(folder / "default.sqlite"), "EMBEDLAB_DEBUG": ""}


def embedlab_cli(environment: dict[str, str], *arguments: str | Path, cwd: Path | None = None,
                 **overrides: str) -> subprocess.CompletedProcess:
    return preloaded.run([sys.executable, "-m", "embedlab", *map(str, arguments)], capture_output=True,
                         text=True, errors="backslashreplace", env={**environment, **overrides},
                         cwd=cwd or REPO_ROOT, timeout=300)


def assert_one_line_error(finished: subprocess.CompletedProcess, status: int, *named: str) -> str:
    """The command failed with ``status``, one ``error:`` line naming every piece of ``named``, no traceback."""
    assert finished.returncode == status, finished.stderr
    assert "Traceback" not in finished.stderr
    errors = [line for line in finished.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith("embedlab "), finished.stderr
    for piece in named:
        assert piece in errors[0], (piece, errors[0])
    return errors[0]


# --- numbers on the command line are checked before anything runs --------------------------------------

@pytest.mark.parametrize("arguments, named", [
    (("embed", "minilm", "--input", "x.txt", "--output", "o.npy", "--batch-size", "0"), "--batch-size: '0' must be at least 1"),
    (("embed", "minilm", "--input", "x.txt", "--output", "o.npy", "--batch-size", "many"), "'many' is not a whole number"),
    (("demo", "--pairs", "0"), "--pairs: '0' must be at least 1"),
    (("eval", "minilm", "--seed", "-1"), "--seed: '-1' must not be negative"),
    (("alignsim", "minilm", "--pairs-per-label", "0"), "--pairs-per-label: '0' must be at least 1"),
    (("mlm-head", "train", "minilm", "--lr", "nan"), "--lr: 'nan' is not a finite number"),
    (("train-token-weights", "minilm", "--checkpoint-every", "0"), "--checkpoint-every: '0' must be at least 1"),
])
def test_bad_numbers_are_usage_errors(environment, tmp_path, arguments, named) -> None:
    finished = embedlab_cli(environment, *arguments, cwd=tmp_path)
    assert_one_line_error(finished, 2, named)
    assert list(tmp_path.iterdir()) == []  # nothing written


# --- results databases ---------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["results", "report"])
def test_reading_a_missing_database_is_an_error_and_creates_nothing(environment, tmp_path, command) -> None:
    missing = tmp_path / "missing.sqlite"
    finished = embedlab_cli(environment, command, "--db", missing, cwd=tmp_path)
    assert_one_line_error(finished, 2, f"results database not found: {missing}")
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_database_is_one_line_and_status_1(environment, tmp_path) -> None:
    damaged = tmp_path / "results.sqlite"
    damaged.write_bytes(b"garbage, not SQLite " * 300)
    finished = embedlab_cli(environment, "results", "--db", damaged)
    assert_one_line_error(finished, 1, "database")
    assert damaged.read_bytes() == b"garbage, not SQLite " * 300  # left as it was, for the user to look at


def test_a_full_disk_while_writing_a_report_is_one_line_and_status_1(environment, tmp_path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    db = ResultsDB(tmp_path / "results.sqlite")
    db.add([Record("m", "sts", "stsb", "test", "spearman", 0.5, 3)], fingerprint="f")
    finished = embedlab_cli(environment, "report", "--db", db.path, "--out", "/dev/full")
    assert_one_line_error(finished, 1, "No space left on device")


def test_a_user_file_given_as_a_folder_names_it(environment, tmp_path) -> None:
    finished = embedlab_cli(environment, "eval", "minilm", "--tasks", f"sts:@{tmp_path}", "--no-db")
    assert_one_line_error(finished, 2, "Is a directory", str(tmp_path))


def test_a_missing_user_file_names_it(environment, tmp_path) -> None:
    finished = embedlab_cli(environment, "eval", "minilm", "--tasks", f"sts:@{tmp_path / 'gone.tsv'}", "--no-db")
    assert_one_line_error(finished, 2, "data file not found", "gone.tsv")


def test_a_bad_line_in_a_user_file_names_file_and_line(environment, tmp_path) -> None:
    file = tmp_path / "pairs.jsonl"
    file.write_text('{"text1": "a", "text2": "b", "score": 1}\n{"text1": null, "text2": "b", "score": 2}\n')
    finished = embedlab_cli(environment, "eval", "minilm", "--tasks", f"sts:@{file}", "--no-db", "--quiet")
    assert_one_line_error(finished, 2, f"{file}, line 2: text1 must be a string, found null")


def test_an_unknown_task_is_a_usage_error(environment) -> None:
    finished = embedlab_cli(environment, "eval", "minilm", "--tasks", "stss", "--no-db")
    assert_one_line_error(finished, 2, "unknown task 'stss'")


# --- embed and similarity inputs -----------------------------------------------------------------------

def test_a_folder_as_input_is_named(environment, tmp_path) -> None:
    finished = embedlab_cli(environment, "embed", "minilm", "--input", tmp_path, "--output", tmp_path / "o.npy")
    assert_one_line_error(finished, 2, f"input {tmp_path} is a folder")
    assert not (tmp_path / "o.npy").exists()


def test_a_missing_input_is_named(environment, tmp_path) -> None:
    finished = embedlab_cli(environment, "embed", "minilm", "--input", tmp_path / "none.txt", "--output", tmp_path / "o.npy")
    assert_one_line_error(finished, 2, "input file not found", "none.txt")


def test_input_that_is_not_utf8_names_the_line(environment, tmp_path) -> None:
    file = tmp_path / "texts.txt"
    file.write_bytes(b"fine\nalso fine\nbroken \xff here\n")
    finished = embedlab_cli(environment, "embed", "minilm", "--input", file, "--output", tmp_path / "o.npy")
    assert_one_line_error(finished, 2, f"{file}:3: not valid UTF-8")


def test_a_lone_surrogate_in_json_input_names_the_line(environment, tmp_path) -> None:
    file = tmp_path / "texts.jsonl"
    file.write_text('{"text": "fine"}\n{"text": "broken \\udc80"}\n')
    finished = embedlab_cli(environment, "embed", "minilm", "--input", file, "--output", tmp_path / "o.npy")
    assert_one_line_error(finished, 2, f"{file}:2: 'text' has a lone surrogate '\\udc80' at character 7")


def test_a_json_input_line_without_a_text_names_the_line(environment, tmp_path) -> None:
    file = tmp_path / "texts.jsonl"
    file.write_text('{"text": "fine"}\n{"text": null}\n')
    finished = embedlab_cli(environment, "embed", "minilm", "--input", file, "--output", tmp_path / "o.npy")
    assert_one_line_error(finished, 2, f"{file}:2: 'text' must be a string")


def test_undecodable_bytes_in_an_argument_name_the_argument(environment) -> None:
    finished = preloaded.run([sys.executable, "-m", "embedlab", "similarity", "minilm", b"caf\xe9", "b"],
                             capture_output=True, env=environment, cwd=REPO_ROOT, timeout=300)
    stderr = finished.stderr.decode("utf-8", "backslashreplace")
    assert finished.returncode == 2 and "Traceback" not in stderr
    assert "text_a has a lone surrogate '\\udce9' at character 3" in stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_input_is_one_line_and_status_1(environment, tmp_path) -> None:
    file = tmp_path / "secret.txt"
    file.write_text("a text\n")
    file.chmod(0)
    finished = embedlab_cli(environment, "embed", "minilm", "--input", file, "--output", tmp_path / "o.npy")
    assert_one_line_error(finished, 1, "Permission denied", str(file))


# --- debugging, interruption ----------------------------------------------------------------------------

def test_embedlab_debug_shows_the_traceback(environment, tmp_path) -> None:
    finished = embedlab_cli(environment, "results", "--db", tmp_path / "missing.sqlite", EMBEDLAB_DEBUG="1")
    assert finished.returncode != 0 and "Traceback" in finished.stderr and "FileNotFoundError" in finished.stderr


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_status_130(environment, tmp_path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"sentence number {k} of a long input\n" for k in range(100_000)))
    # A shell without job control starts background commands with SIGINT ignored, and an ignored signal
    # stays ignored across exec, so a suite launched that way (``pytest … &``, some CI runners) would hand
    # its child a deaf SIGINT. A user at a terminal has the default disposition: give the child that one
    # (a handler installed in the parent is reset to the default in the child by exec).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = preloaded.Popen([sys.executable, "-m", "embedlab", "embed", "minilm", "--input", str(texts),
                                   "--out", str(tmp_path / "o.npy"), "--progress"],
                                  stderr=subprocess.PIPE, env=environment, cwd=REPO_ROOT)
    finally:
        signal.signal(signal.SIGINT, previous)
    said = bytearray()
    reader = threading.Thread(target=lambda: [said.extend(chunk) for chunk in iter(lambda: os.read(process.stderr.fileno(), 4096), b"")])
    reader.start()
    try:
        deadline = time.monotonic() + 240
        # until a bar shows that it is encoding ("Loading weights: 100%|" from transformers comes earlier)
        while not re.search(rb"(encoding|token states): +\d+%\|", bytes(said)) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:  # never leave a 100,000-text encode running behind a failed test
            process.kill()
            process.wait()
    reader.join(timeout=10)
    stderr = said.decode("utf-8", "backslashreplace")
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.rstrip().endswith("embedlab embed: error: interrupted")
    assert not (tmp_path / "o.npy").exists()
