"""The conformance matrix (tests/conformance/matrix.py): each architecture's row runs, and equals docs/models.md.

``EMBEDLAB_WRITE_MATRIX=1`` rewrites the rows in docs/models.md from this run instead of comparing them.
"""

from __future__ import annotations

import os

import pytest

from conformance.matrix import TINY_CORPUS, documented_lines, row_lines, run_row, write_row
from conformance.tiny_models import ARCHITECTURES, build_tiny


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.crosspath
def test_every_cell_runs_or_refuses_and_the_documented_row_is_this_run(architecture, tmp_path, monkeypatch) -> None:
    # avg: averages token vectors over a tiny corpus instead of WikiText-2 (seconds, not minutes)
    monkeypatch.setattr("embedlab.pooling.static.wikitext2_paragraphs", lambda split, unk_token="<unk>": list(TINY_CORPUS))
    monkeypatch.setenv("EMBEDLAB_PROGRESS", "quiet")
    folder = build_tiny(architecture, tmp_path / "model")
    row = run_row(str(folder), tmp_path / "work")
    broken = {column: outcome.detail for column, outcome in row.items() if outcome.status == "broken"}
    assert not broken, f"{architecture}: broken cells {broken}"
    if os.environ.get("EMBEDLAB_WRITE_MATRIX") == "1":
        write_row(architecture, row, ARCHITECTURES)
    assert documented_lines(architecture) == row_lines(architecture, row), "docs/models.md is stale: rerun with EMBEDLAB_WRITE_MATRIX=1"
