"""Tests for embedlab.version: the code version of a source tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import embedlab
from embedlab.version import code_version, source_version


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def test_source_version_ignores_committed_records_but_not_code(tmp_path: Path) -> None:
    records = tmp_path / "embedlab" / "resources" / "records"
    records.mkdir(parents=True)
    (records / "neural.jsonl").write_text("{}\n")
    (tmp_path / "embedlab" / "pooling.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "start")
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert source_version(tmp_path, "1.0") == f"1.0+{commit}"
    # a recompute stored its records: the next run's code is still the commit's
    (records / "neural.jsonl").write_text("{}\n{}\n")
    assert source_version(tmp_path, "1.0") == f"1.0+{commit}"
    (tmp_path / "embedlab" / "pooling.py").write_text("x = 2\n")
    assert source_version(tmp_path, "1.0") == f"1.0+{commit}.dirty"
    assert source_version(tmp_path.parent, "1.0") == "1.0"  # outside any checkout


def test_code_version_starts_with_the_package_version() -> None:
    assert code_version().startswith(embedlab.__version__)
