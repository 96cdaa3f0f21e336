"""Child processes of the suite, forked from a Python that has already imported torch, transformers and embedlab.

A test that runs ``python -m embedlab ...`` or ``python -c CODE`` as a separate process (to kill it, interrupt
it, race two of them on one cache, or read what it prints) spent ≈ 5 CPU s in each such child, ≈ 4.5 of them
importing torch, transformers and scipy again. :func:`run` and :class:`Popen` take the arguments of
``subprocess.run`` / ``subprocess.Popen`` and start the child by forking a per-worker server that did those
imports once (tests/preloaded_server.py), as multiprocessing's forkserver does with its preload list: the child
is still its own process (its own pid, streams, environment, folder, signals and exit status), runs the module
or code as ``__main__`` and ends as the interpreter would; only the imports are shared. ≈ 0.6 CPU s instead
of ≈ 5 for a CLI evaluation of a few pairs.

Tests about a fresh interpreter itself (which modules a command imports, what the program prints before
anything is loaded) keep starting ``python``; so does anything other than ``sys.executable -m|-c``.
``EMBEDLAB_TEST_FRESH_CHILDREN=1`` starts every child from nothing, to rule the server out.

The CPU seconds of the children (reported by the server when it reaps them) are added to
:data:`children_cpu_seconds`, which the per-test CPU log (tests/conftest.py) counts.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

SERVER = Path(__file__).with_name("preloaded_server.py")
FRESH_VARIABLE = "EMBEDLAB_TEST_FRESH_CHILDREN"
PIPE, DEVNULL, STDOUT = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT

children_cpu_seconds = 0.0  # CPU of every reaped child, for the per-test CPU log


class _Server:
    """The forking server of this process (started at the first request, gone when this process exits)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen([sys.executable, str(SERVER), str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()
        self.socket = ours
        self.lock = threading.Lock()
        self.owner = os.getpid()

    def fork(self, request: dict, fds: list[int]) -> int:
        with self.lock:
            socket.send_fds(self.socket, [json.dumps(request).encode()], fds)
            reply = self.socket.recv(64)
        if not reply:
            raise RuntimeError(f"the preloading server ({SERVER.name}) exited with status {self.process.wait()}")
        return int(reply)


_server: _Server | None = None


def _the_server() -> _Server:
    global _server
    if _server is None or _server.owner != os.getpid() or _server.process.poll() is not None:
        _server = _Server()
    return _server


def stop() -> None:
    """End this process's server (its children have ended), and reap it, so that its CPU time and its children's
    are counted in this process's like any child's (``time pytest ...``)."""
    global _server
    if _server is not None and _server.owner == os.getpid():
        _server.socket.close()
        _server.process.wait(timeout=60)
    _server = None


def _preloadable(args) -> bool:
    return (not os.environ.get(FRESH_VARIABLE) and isinstance(args, (list, tuple)) and len(args) >= 3
            and str(args[0]) == sys.executable and args[1] in ("-m", "-c"))


class Popen:
    """``subprocess.Popen`` for ``[sys.executable, "-m" | "-c", ...]``, the child forked from the preloaded server
    (any other command is handed to ``subprocess.Popen``)."""

    def __new__(cls, args, **options):
        if not _preloadable(args):
            return subprocess.Popen(args, **options)
        return super().__new__(cls)

    def __init__(self, args, stdin=None, stdout=None, stderr=None, env=None, cwd=None, text=None, universal_newlines=None,
                 encoding=None, errors=None, pass_fds=()) -> None:
        if pass_fds:
            raise ValueError("preloaded children get no extra file descriptors")
        self.args, self.returncode = args, None
        text = bool(text or universal_newlines or encoding or errors)
        child_fds, ours = [], {}
        for name, choice, fd in (("stdin", stdin, 0), ("stdout", stdout, 1), ("stderr", stderr, 2)):
            if choice == PIPE:
                read, write = os.pipe()
                child_fds.append(read if fd == 0 else write)
                ours[name] = write if fd == 0 else read
            elif choice == DEVNULL:
                child_fds.append(os.open(os.devnull, os.O_RDWR))
            elif choice == STDOUT and fd == 2:
                child_fds.append(os.dup(child_fds[1]))
            elif choice is None:
                child_fds.append(os.dup(fd))
            else:
                child_fds.append(os.dup(choice if isinstance(choice, int) else choice.fileno()))
        status_read, status_write = os.pipe()
        arguments = [os.fsdecode(argument) for argument in args]
        request = {"module": arguments[2] if arguments[1] == "-m" else None, "code": arguments[2] if arguments[1] == "-c" else None,
                   "argv": arguments[3:], "env": dict(os.environ if env is None else {k: os.fsdecode(v) for k, v in env.items()}),
                   "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                   "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}
        try:
            self.pid = _the_server().fork(request, [*child_fds, status_write])
        finally:
            for descriptor in (*child_fds, status_write):
                os.close(descriptor)
        self._status = status_read
        self.stdin = self.stdout = self.stderr = None
        for name, descriptor in ours.items():
            stream = io.open(descriptor, "wb" if name == "stdin" else "rb")
            if text:
                stream = io.TextIOWrapper(stream, encoding=encoding, errors=errors, write_through=name == "stdin")
            setattr(self, name, stream)

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._reap()
        return self.returncode

    def _reap(self) -> None:
        global children_cpu_seconds
        reported = os.read(self._status, 64).decode().split()
        os.close(self._status)
        if not reported:  # the pipe closed without a status: the server ended before reaping this child
            raise RuntimeError(f"the preloading server ended before child {self.pid} ({self.args[:3]}) did")
        status, cpu = reported
        children_cpu_seconds += float(cpu)
        self.returncode = int(status)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input=None, timeout: float | None = None) -> tuple:
        """As ``subprocess.Popen.communicate``: write ``input``, read stdout and stderr to their ends, wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        collected = {}

        def drain(name: str) -> None:
            collected[name] = getattr(self, name).read()

        readers = [threading.Thread(target=drain, args=(name,), daemon=True) for name in ("stdout", "stderr") if getattr(self, name)]
        for reader in readers:
            reader.start()
        if self.stdin:
            if input:
                try:
                    self.stdin.write(input)
                except BrokenPipeError:
                    pass
            self.stdin.close()
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for name in ("stdout", "stderr"):
            if getattr(self, name):
                getattr(self, name).close()
        return collected.get("stdout"), collected.get("stderr")

    def __enter__(self) -> Popen:
        return self

    def __exit__(self, *exception) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream:
                stream.close()
        self.wait()


def run(args, input=None, capture_output: bool = False, timeout: float | None = None, check: bool = False,
        **options) -> subprocess.CompletedProcess:
    """``subprocess.run`` with the child forked from the preloaded server where it can be (see :class:`Popen`)."""
    if not _preloadable(args):
        return subprocess.run(args, input=input, capture_output=capture_output, timeout=timeout, check=check, **options)
    if capture_output:
        options["stdout"] = options["stderr"] = PIPE
    if input is not None:
        options["stdin"] = PIPE
    process = Popen(args, **options)
    try:
        stdout, stderr = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    finished = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    if check:
        finished.check_returncode()
    return finished
