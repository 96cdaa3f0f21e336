"""The ``embedlab`` entry point: every command group registered, ``--version``, ``python -m embedlab``,
and expected failures as one line on stderr with exit status 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import embedlab
from embedlab.cli.app import build_parser, main

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent
COMMANDS = ("embed", "similarity", "methods", "demo", "eval", "results", "report", "mlm-head", "explain",
            "train-token-weights", "alignsim")


def test_every_command_group_is_registered():
    parser = build_parser()
    subcommands = next(action for action in parser._actions if action.dest == "command").choices
    assert set(COMMANDS) <= set(subcommands)


def test_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"embedlab {embedlab.__version__}"


def test_python_dash_m_embedlab_help():
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    finished = subprocess.run([sys.executable, "-m", "embedlab", "--help"], capture_output=True, text=True,
                              env=environment, cwd=REPO_ROOT, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("usage: embedlab")
    for command in COMMANDS:
        assert command in finished.stdout


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as stopped:
        main([])
    assert stopped.value.code == 2
    assert "required" in capsys.readouterr().err


def test_expected_failures_are_one_line_and_status_2(capsys):
    assert main(["similarity", "minilm:colour=red", "a", "b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embedlab similarity: error:") and len(err.strip().splitlines()) == 1
    assert "valid options" in err
