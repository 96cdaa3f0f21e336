"""``embed --out`` follows the README's rule: a path ending in ``.npy`` or ``.parquet`` (any case) is one
file, any other path a folder of shards (``vectors.2024-06`` included), and a suffix naming another file
format (``.npz``, ``.csv``) is refused rather than turned into a folder. An input that holds no texts
(``/dev/null``, an empty file) is the same clear error for a file and for a folder, and writes nothing.

The runs that write vectors call the CLI's ``main`` in this process (its exit status is ``main``'s return
value); the refusals run ``python -m embedlab`` as a user would, to see the one-line error on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from embedlab.cli.app import main
from embedlab.cli.embed import output_kind
from embedlab.errors import InputError
from tests.faults.test_cli import assert_one_line_error, embedlab_cli, environment  # noqa: F401 - the fixture


def embed(texts: Path, out: Path) -> int:
    """``embedlab embed random:minilm --input TEXTS --out OUT --quiet`` in this process: its exit status."""
    return main(["embed", "random:minilm", "--input", str(texts), "--out", str(out), "--quiet"])


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("A man plays a guitar.\nA woman reads.\n", encoding="utf-8")
    return path


def test_an_upper_case_npy_suffix_writes_one_npy_file(tmp_path, texts):
    out = tmp_path / "V.NPY"
    assert embed(texts, out) == 0
    vectors = np.load(out, allow_pickle=False)
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32


def test_an_upper_case_parquet_suffix_writes_one_parquet_file(tmp_path, texts):
    out = tmp_path / "V.Parquet"
    assert embed(texts, out) == 0
    assert pq.read_table(out).num_rows == 2


def test_a_dotted_name_that_is_no_file_format_is_a_folder(tmp_path, texts):
    out = tmp_path / "vectors.2024-06"
    assert embed(texts, out) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is True


def test_another_file_format_is_refused_not_made_a_folder(environment, tmp_path, texts):  # noqa: F811
    out = tmp_path / "vectors.npz"
    finished = embedlab_cli(environment, "embed", "random:minilm", "--input", texts, "--out", out)
    assert_one_line_error(finished, 2, str(out), "is not a format embed writes", ".npy", ".parquet", "folder")
    assert not out.exists()


@pytest.mark.parametrize(("name", "kind"), [
    ("v.npy", ".npy"), ("V.NPY", ".npy"), ("v.Npy", ".npy"), ("x.PARQUET", ".parquet"), ("vectors", "folder"),
    ("vectors.2024-06", "folder"), ("run.v2", "folder"), ("vectors.CSV", None), ("vectors.pt", None), ("v.jsonl", None),
])
def test_the_output_kind_follows_the_readme_rule(name, kind):
    if kind is None:
        with pytest.raises(InputError, match="is not a format embed writes"):
            output_kind(Path(name))
    else:
        assert output_kind(Path(name)) == kind


@pytest.mark.parametrize("target", ["v.npy", "folder"])
@pytest.mark.parametrize("source", ["/dev/null", "empty"])
def test_an_input_without_texts_is_the_same_error_for_a_file_and_a_folder(environment, tmp_path, target, source):  # noqa: F811
    if source == "empty":
        source = tmp_path / "empty.txt"
        source.write_bytes(b"")
    out = tmp_path / target
    finished = embedlab_cli(environment, "embed", "random:minilm", "--input", source, "--out", out)
    assert_one_line_error(finished, 2, f"{source} holds no texts", "nothing was written")
    assert not out.exists()
