"""Tests for ``embedlab reproduce``: the report from committed records, in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.cli.app import main
from embedlab.results.reproduce.values import PAPERS, paper_values


def test_quick_renders_every_paper_from_committed_records(tmp_path: Path, capsys) -> None:
    assert main(["reproduce", "--quick", "--out", str(tmp_path / "report")]) == 0
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "wrote" in capsys.readouterr().out
    for paper in PAPERS:
        assert f"## {paper}:" in markdown and f"<h2>{paper}:" in page
    cells = sum(len(paper_values(paper)) for paper in PAPERS)
    rows = [line for line in markdown.splitlines() if line.startswith(("| Table ", "| Appendix "))]
    assert len(rows) == cells  # one line per paper value
    # a re-render from the same records is byte-identical (no timestamps), so committed reports diff only on numbers
    assert main(["reproduce", "--quick", "--out", str(tmp_path / "again")]) == 0
    for name in ("report.md", "report.html"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "report" / name).read_bytes()


def test_one_paper_only(tmp_path: Path) -> None:
    assert main(["reproduce", "--paper", "matching", "--out", str(tmp_path)]) == 0
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## matching:" in markdown and "## neural:" not in markdown


@pytest.mark.parametrize("argv", [["reproduce", "--quick", "--recompute"], ["reproduce", "--paper", "nonsense"]])
def test_bad_arguments_are_usage_errors(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--out", str(tmp_path)])
    assert stopped.value.code == 2
