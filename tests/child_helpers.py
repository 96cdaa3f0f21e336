"""Child processes that race a cache build: read the line each announces at a step, or fail with its stderr."""

from __future__ import annotations

import subprocess


def expect_line(child: subprocess.Popen, word: str) -> str:
    """The child's next stdout line, which must start with ``word`` (else kill it and show its stderr)."""
    line = child.stdout.readline().strip()
    if not line.startswith(word):
        child.kill()
        raise AssertionError(f"expected {word!r} from the child, got {line!r}; stderr:\n{child.stderr.read()[-3000:]}")
    return line
