"""The server side of tests/preloaded.py: import the heavy libraries once, then fork one child per request.

Run as ``python preloaded_server.py FD`` by tests/preloaded.py, FD being its end of a ``SOCK_SEQPACKET``
socket pair. A request is one JSON message (argv, environment, working folder, SIGINT ignored or not) with four
file descriptors: the child's stdin, stdout and stderr, and a pipe on which the server writes the child's exit
status and CPU seconds once it has reaped it. The reply is the child's pid.

A child starts as ``python -m MODULE`` or ``python -c CODE`` would, from the interpreter state right after the
imports: its own environment, folder, argv, standard streams and random seeds, SIGINT as exec would leave it;
it runs the module or code as ``__main__``, then ends as the interpreter does (non-daemon threads joined, atexit
handlers, streams flushed) with the same exit status.
"""

from __future__ import annotations

import atexit
import builtins
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import traceback

# What a child of the suite spends ≈ 4.5 of its ≈ 5 CPU s on when it starts from nothing.
PRELOAD = ("numpy", "torch", "transformers", "transformers.models.bert.modeling_bert", "transformers.models.auto.modeling_auto",
           "scipy.stats", "embedlab", "embedlab.registry", "embedlab.cli.app", "embedlab.methods.pooled", "embedlab.evaluation")


def main(fd: int) -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    server = socket.socket(fileno=fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wake-up pipe
    status_pipes: dict[int, int] = {}
    while True:
        ready, _, _ = select.select([server, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
        if server in ready:
            message, fds, _, _ = socket.recv_fds(server, 1 << 20, 4)
            if not message:  # the test process has gone: no more requests
                break
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                server.close()
                os.close(wake_read)
                os.close(wake_write)
                for pipe in status_pipes.values():  # the other children's
                    os.close(pipe)
                _child(request, fds)
            for descriptor in fds[:3]:
                os.close(descriptor)
            status_pipes[pid] = fds[3]
            server.send(str(pid).encode())
        while status_pipes:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                break
            pipe = status_pipes.pop(pid)
            os.write(pipe, f"{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime}".encode())
            os.close(pipe)


def _child(request: dict, fds: list[int]) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # exec leaves an ignored SIGINT ignored and resets a handled one; Python then installs its own handler
    signal.signal(signal.SIGINT, signal.SIG_IGN if request["sigint_ignored"] else signal.default_int_handler)
    os.close(fds[3])
    for target, descriptor in enumerate(fds[:3]):
        os.dup2(descriptor, target)
        os.close(descriptor)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # a fresh interpreter's seeds, not the server's: ``random`` reseeds itself after a fork, numpy's global one does not
    sys.modules["numpy"].random.seed()
    code = 0
    try:
        if request["module"]:
            sys.argv = [request["module"], *request["argv"]]
            sys.path[0] = os.getcwd()
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *request["argv"]]
            sys.path[0] = ""
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # as the interpreter does at exit: wait for non-daemon threads, then atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:  # an uncaught KeyboardInterrupt: the interpreter ends by the signal itself
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main(int(sys.argv[1]))
