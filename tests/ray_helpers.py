"""Ray's embedding actor processes started by THIS test process: the machine is shared (another xdist worker,
another user's Ray), so the Ray tests count, kill and wait for only their own actors."""

from __future__ import annotations

import os
from pathlib import Path

ENCODER_TITLE = b"ray::MapWorker(MapBatches(_Encoder))"  # how Ray titles an embedding actor's process


def _processes() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) of every process that can be read."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes()
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            table[int(entry.name)] = (parent, title)
    return table


def own_encoder_actors() -> dict[int, int]:
    """Embedding actor pid -> its parent's pid (the raylet of the node that runs it), for the actors that
    descend from this process (a local Ray's raylets, and a ``Cluster``'s nodes, are its children)."""
    table, me = _processes(), os.getpid()

    def descends(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = table.get(pid, (0, b""))[0]
            if pid == me:
                return True
        return False

    return {pid: parent for pid, (parent, title) in table.items() if title.startswith(ENCODER_TITLE) and descends(pid)}


def still_running(pids: set[int]) -> set[int]:
    """Those of ``pids`` that are still embedding actors (not exited, their pid not reused)."""
    running = set()
    for pid in pids:
        try:
            if (Path("/proc") / str(pid) / "cmdline").read_bytes().startswith(ENCODER_TITLE):
                running.add(pid)
        except OSError:
            continue
    return running
