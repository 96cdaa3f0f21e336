"""Running the app on uvicorn: bind (``port=0`` picks a free port), say where, serve until SIGTERM/SIGINT.

The socket is bound and listening before the one line ``listening on http://HOST:PORT`` is printed, so a
client that reads the line can connect at once (the kernel queues it until uvicorn accepts). On SIGTERM
or SIGINT uvicorn stops accepting, lets every request in flight finish (its batch included, since the
batchers stop only after the server has drained), then the command exits with status 0.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from embedlab.errors import InputError

GRACEFUL_SHUTDOWN_S = 60  # in-flight requests get this long to finish after SIGTERM
# uvloop's event loop and httptools' parser (the serve extra), named rather than left to uvicorn's "auto", which
# falls back without a word: one openai client sending 50 small requests in turn waited 96 ms per request (p50)
# on asyncio's loop with h11 or httptools, 51 ms on uvloop (either parser), as infinity-emb does on the same
# machine (docs/records/bench_serve.md, 2026-11-28 19:10)
EVENT_LOOP = "uvloop"
HTTP_PARSER = "httptools"


class GracefulServer(uvicorn.Server):
    """uvicorn's server, except that a SIGTERM or SIGINT that stopped it gracefully ends the command with
    status 0 (uvicorn raises the signal again once drained: the process would die of it, status -15 or a
    KeyboardInterrupt). A second Ctrl-C still forces the exit, as in uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield
            return
        previous = {number: signal.signal(number, self.handle_exit) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


@dataclass
class Listener:
    """A uvicorn server and the listening socket it will serve on."""

    server: GracefulServer
    socket: socket.socket

    @property
    def url(self) -> str:
        host, port = self.socket.getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def run(self) -> None:
        """Serve until told to stop (a signal, or ``server.should_exit``); closes the socket."""
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.socket.close()


def bind(host: str = "127.0.0.1", port: int = 8000) -> socket.socket:
    """A socket bound to ``host:port`` (0: a free port), not yet listening: taken before the methods load, so
    that a port in use or a host that is not this machine's is refused at once, naming them."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise InputError(f"--host {host}: not an address or a known host name ({error.strerror})") from None
    family, _, _, _, address = min(infos, key=lambda info: info[0] != socket.AF_INET)  # IPv4 where a name has both
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise InputError(f"--port {port}: the port is in use on {host} (another server listens there); "
                             "choose another, or --port 0 for a free one") from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise InputError(f"--host {host}: not an address of this machine") from None
        if error.errno == errno.EACCES:
            raise InputError(f"--port {port}: not allowed here (ports below 1024 need privileges); choose another") from None
        raise
    return sock


def listen(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, sock: socket.socket | None = None) -> Listener:
    """Listen on ``sock`` (or a socket :func:`bind` takes on ``host:port``) for ``app``; nothing is served until
    :meth:`Listener.run`."""
    sock = sock if sock is not None else bind(host, port)
    try:
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", loop=EVENT_LOOP, http=HTTP_PARSER,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, server_header=False)
    return Listener(GracefulServer(config), sock)
