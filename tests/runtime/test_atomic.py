"""Staging copies beside a target, and their removal once their writer is gone."""

from __future__ import annotations

import os
import subprocess
import sys

from embedlab.runtime.cache.atomic import remove_orphan_staging, staging_path


def test_only_the_staging_copies_of_dead_writers_are_removed(tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead = int(finished.stdout)  # the pid of a process that has exited
    joined, converted = tmp_path / "model.gguf", tmp_path / "converted"
    dead_file = tmp_path / f".model.gguf.{dead}.staging"  # a joiner's half-written file
    dead_file.write_bytes(b"half")
    dead_folder = tmp_path / f".converted.{dead}.staging"  # a converter's half-written folder
    dead_folder.mkdir()
    (dead_folder / "model.safetensors").write_bytes(b"half")
    mine = staging_path(joined)
    mine.write_bytes(b"in progress")
    assert mine == tmp_path / f".model.gguf.{os.getpid()}.staging"
    assert remove_orphan_staging(joined) == [dead_file]
    assert remove_orphan_staging(converted) == [dead_folder]
    assert not dead_file.exists() and not dead_folder.exists() and mine.exists()
