"""tests/preloaded.py: a child forked from the preloaded server behaves as the same command started by
``subprocess`` (exit status, streams, argv, environment, folder, signals, interpreter exit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import preloaded

CASES = {
    "status, streams, argv and environment": ("import os, sys\nprint(sys.argv, os.environ['PRELOADED_CASE'], os.getcwd())\n"
                                              "sys.stderr.write('to stderr\\n')\nsys.exit(3)"),
    "an uncaught exception": "raise ValueError('no')",
    "an uncaught KeyboardInterrupt": "raise KeyboardInterrupt",
    "a message as exit code": "raise SystemExit('stopped here')",
    "stdin read to its end": "import sys\nprint(sys.stdin.read().upper())",
    "a non-daemon thread joined, then atexit": ("import atexit, threading, time\natexit.register(print, 'atexit ran')\n"
                                                "threading.Thread(target=lambda: (time.sleep(0.3), print('thread ran'))).start()"),
    "fresh random seeds": "import random, numpy\nprint(random.random(), numpy.random.random())",
}


def _both(code: str, tmp_path, **options) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    arguments = [sys.executable, "-c", code, "one", os.fsencode("caf\udce9")]
    options = {"capture_output": True, "text": True, "errors": "backslashreplace", "cwd": tmp_path,
               "env": {**os.environ, "PRELOADED_CASE": "yes"}, "timeout": 60, **options}
    return subprocess.run(arguments, **options), preloaded.run(arguments, **options)


def _with_sigint(disposition, start):
    """``start()`` with this process's SIGINT set to ``disposition`` (an xdist worker ignores SIGINT)."""
    previous = signal.signal(signal.SIGINT, disposition)
    try:
        return start()
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_preloaded_child_ends_as_a_fresh_interpreter_would(case, tmp_path):
    fresh, forked = _both(CASES[case], tmp_path, input="some input" if "stdin" in case else None)
    assert forked.returncode == fresh.returncode
    if "random" in case:  # neither repeats the server's (or another child's) draws
        another = preloaded.run(forked.args, capture_output=True, text=True)
        draws = [output.split() for output in (fresh.stdout, forked.stdout, another.stdout)]
        assert len({python for python, _ in draws}) == len({numpy for _, numpy in draws}) == 3
        return
    assert forked.stdout == fresh.stdout
    # a traceback names the interpreter's own frames differently; its last line is the same
    assert forked.stderr.strip().splitlines()[-1:] == fresh.stderr.strip().splitlines()[-1:]


def test_a_child_is_its_own_process_that_can_be_killed_and_interrupted(tmp_path):
    script = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)"
    child = preloaded.Popen([sys.executable, "-c", script], stdout=preloaded.PIPE, text=True)
    assert int(child.stdout.readline()) == child.pid != os.getpid() and child.poll() is None
    child.kill()
    assert child.wait(timeout=10) == -signal.SIGKILL
    child.stdout.close()
    with pytest.raises(subprocess.TimeoutExpired):
        preloaded.run([sys.executable, "-c", script], capture_output=True, timeout=0.5)
    interrupted = _with_sigint(signal.default_int_handler, lambda: preloaded.Popen(
        [sys.executable, "-c", "import time\nprint('ready', flush=True)\ntime.sleep(60)"], stdout=preloaded.PIPE,
        stderr=preloaded.PIPE, text=True))
    assert interrupted.stdout.readline() == "ready\n"
    interrupted.send_signal(signal.SIGINT)
    _, stderr = interrupted.communicate(timeout=10)
    assert interrupted.returncode == -signal.SIGINT and stderr.strip().endswith("KeyboardInterrupt")


def test_an_ignored_sigint_stays_ignored_as_across_exec(tmp_path):
    code = "import signal\nprint(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    fresh, forked = _with_sigint(signal.SIG_IGN, lambda: _both(code, tmp_path))
    assert forked.stdout == fresh.stdout == "True\n"
    fresh, forked = _with_sigint(signal.default_int_handler, lambda: _both(code, tmp_path))
    assert forked.stdout == fresh.stdout == "False\n"


def test_the_module_runs_as_main_and_other_commands_are_plain_subprocesses(tmp_path):
    help_text = preloaded.run([sys.executable, "-m", "embedlab", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: embedlab")
    plain = preloaded.Popen(["true"])
    assert isinstance(plain, subprocess.Popen) and plain.wait(timeout=10) == 0
    assert preloaded.run(["sh", "-c", "echo $0", "plain"], capture_output=True, text=True).stdout == "plain\n"
