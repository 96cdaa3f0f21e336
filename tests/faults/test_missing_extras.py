"""An optional dependency group that is not installed: the command says which extra to install, in one
line, and ``import embedlab`` and the main job never needed it (pyproject.toml: plots, alignsim, mteb)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from embedlab.cli.app import main
from embedlab.evaluation.records import Record
from embedlab.results.database import ResultsDB
from embedlab.runtime.extras import MissingExtraError
from embedlab.runtime.memo import clear


@pytest.fixture()
def without(monkeypatch):
    """Make ``import NAME`` fail for the given top-level modules, as when they are not installed."""

    def hide(*names: str) -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in names:
                monkeypatch.delitem(sys.modules, name)
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: ImportError on import
        clear()

    yield hide
    clear()


def test_report_without_matplotlib_names_the_plots_extra(without, tmp_path, capsys):
    database = ResultsDB(tmp_path / "r.sqlite")
    database.add([Record("m", "sts", "stsb", "test", "spearman", 0.8, 10)], fingerprint="f")
    without("matplotlib")
    assert main(["report", "--db", str(database.path), "--out", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err == ("embedlab report: error: drawing plots (matplotlib) needs the optional 'plots' dependencies: "
                   "pip install 'embedlab[plots]'\n")


def test_alignsim_tagging_without_spacy_names_the_alignsim_extra(without):
    from embedlab.evaluation.alignsim import lexicon

    without("spacy", "nltk")
    with pytest.raises(MissingExtraError, match=r"pip install 'embedlab\[alignsim\]'"):
        lexicon.tag_sentences(["A man plays a guitar."])
    with pytest.raises(MissingExtraError, match=r"WordNet through nltk.*embedlab\[alignsim\]"):
        lexicon.wordnet()


def test_import_embedlab_needs_no_extra():
    blocked = "import sys\nfor name in ('matplotlib', 'spacy', 'nltk', 'mteb'):\n    sys.modules[name] = None\n" \
              "import embedlab, embedlab.evaluation, embedlab.results.tables, embedlab.cli.app\n" \
              "embedlab.cli.app.build_parser()\nprint('ok')"
    finished = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0 and finished.stdout == "ok\n", finished.stderr
