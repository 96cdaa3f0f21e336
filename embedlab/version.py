"""The package version (``__version__``, which ``embedlab.__version__`` hands on) and the code version stored
with every result and every shard folder: the package version plus the git commit of the source tree when it
is a checkout. It imports only the runtime, so that every layer above may read the version."""

from __future__ import annotations

import subprocess
from pathlib import Path

from embedlab.runtime.memo import cached

__version__ = "0.1.0"

# Committed result records (what `embedlab reproduce --recompute` rewrites) are outputs, not code: a
# run that follows another must not call its own code "dirty" because the first one stored its records.
RECORDS_PATHSPEC = ":(exclude)embedlab/resources/records"


@cached("results.code_version", maxsize=1)
def code_version() -> str:
    """``embedlab.__version__`` plus the short git commit of the source tree (with ``.dirty`` when modified)."""
    return source_version(Path(__file__).resolve().parent.parent, __version__)


def source_version(source: Path, version: str) -> str:
    """``version+commit`` of the git checkout at ``source``, ``.dirty`` when a tracked file other than the
    committed result records differs from the commit; ``version`` alone outside a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "--", ".", RECORDS_PATHSPEC],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version  # not a git checkout (installed package): the version alone
    return f"{version}+{commit}{'.dirty' if dirty else ''}" if commit else version
