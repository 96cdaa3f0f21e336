"""Every task's dataset file is read and parsed before the first task runs: a bad file given for the third
task fails at once, naming file and line, not after the first two tasks have encoded their data. A pipe
(``<(…)``, a FIFO) or a device as a dataset file is refused with the reason: its identity hash would drain
it, and the parser then found "no scored pairs" or waited forever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from embedlab.data import DataFormatError
from embedlab.evaluation.harness import evaluate, parse_tasks
from tests.fakes import FakeMethod, isolated_eval_cache  # noqa: F401  (autouse fixture)


def _scored(folder: Path, name: str, rows: list[str]) -> Path:
    path = folder / name
    path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    return path


GOOD = [f"text {k} one\ttext {k} two\t{k % 5}" for k in range(12)]


@pytest.mark.parametrize(("third", "content", "named"), [
    ("sts", GOOD[:4] + ["a\tb\tnot-a-score"], r"bad\.tsv, line 5"),
    ("correlations", GOOD[:2] + ["only one field"], r"bad\.tsv, line 3"),
    ("clustering", ["label\ttext"] + ["a\tfine text"] * 3 + ["x"], r"bad\.tsv, line 5"),
    ("classification", ["pos\tgood", "neg"], r"bad\.tsv, line 2"),
    ("triplets", ["g1\tone", "g2"], r"bad\.tsv, line 2"),
])
def test_a_bad_file_for_a_later_task_fails_before_the_first_task_runs(tmp_path, third, content, named):
    first, second = _scored(tmp_path, "one.tsv", GOOD), _scored(tmp_path, "two.tsv", GOOD)
    bad = _scored(tmp_path, "bad.tsv", content)
    method = FakeMethod()
    tasks = parse_tasks([f"sts:@{first}", f"correlations:@{second}", f"{third}:@{bad}"])
    with pytest.raises(DataFormatError, match=named):
        evaluate([method], tasks)
    assert method.encode_calls == [] and method.similarity_calls == 0  # nothing ran


@pytest.mark.parametrize("later", ["sts:sick-r", "alignsim:mrpc", "alignsim:all", "isotropy:wikitext2"])
def test_a_missing_built_in_data_file_fails_before_the_first_task_runs(tmp_path, monkeypatch, later):
    good = _scored(tmp_path, "one.tsv", GOOD)
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path / "no-data-here"))
    from embedlab.runtime.settings import configure

    configure()
    try:
        method = FakeMethod()
        with pytest.raises(Exception, match="no-data-here"):
            evaluate([method], parse_tasks([f"sts:@{good}", later]))
        assert method.encode_calls == []
    finally:
        monkeypatch.delenv("EMBEDLAB_DATA")
        configure()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pipe_or_device_as_a_dataset_file_is_refused_with_the_reason(tmp_path, kind):
    if kind == "fifo":
        source = tmp_path / "pairs.tsv"
        os.mkfifo(source)
    else:
        source = Path("/dev/zero")
    with pytest.raises(DataFormatError, match=r"is a (named pipe|device), not a regular file.*save it to a file first"):
        parse_tasks(f"sts:@{source}")


def test_process_substitution_as_a_dataset_is_refused_not_drained(tmp_path):
    # bash's <(…) hands the program /dev/fd/N, a pipe: the run must refuse it, not report "no scored pairs"
    rows = "\n".join(GOOD)
    script = ("from embedlab.evaluation.harness import parse_tasks; import sys; "
              "parse_tasks(f'sts:@{sys.argv[1]}')")
    result = subprocess.run(["bash", "-c", f'"{sys.executable}" -c "{script}" <(printf "%s\\n" "$ROWS")'],
                            capture_output=True, text=True, env={**os.environ, "ROWS": rows}, timeout=120)
    assert result.returncode != 0
    assert "is a named pipe, not a regular file" in result.stderr
    assert "no scored pairs" not in result.stderr
