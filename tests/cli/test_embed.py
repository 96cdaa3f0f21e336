"""``embedlab embed`` and ``embedlab similarity``: input files (lines, JSON lines, stdin), errors that name
the file and line, and outputs equal to the Python API's."""

import io

import numpy as np
import pytest

import embedlab
from embedlab.cli.app import main
from embedlab.cli.embed import InputError, read_texts


def test_embed_lines_file(tmp_path, capsys):
    source = tmp_path / "texts.txt"
    source.write_text("A man plays a guitar.\n\nA woman reads.\n", encoding="utf-8")
    output = tmp_path / "out.npy"
    assert main(["embed", "minilm", "--input", str(source), "--output", str(output), "--no-progress"]) == 0
    vectors = np.load(output, allow_pickle=False)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, embedlab.load("minilm").encode(["A man plays a guitar.", "", "A woman reads."]), atol=1e-6)


def test_embed_json_lines_and_stdin(tmp_path, monkeypatch):
    source = tmp_path / "texts.jsonl"
    source.write_text('{"text": "one", "id": 1}\n{"text": "two"}\n', encoding="utf-8")
    assert read_texts(str(source)) == ["one", "two"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"first\nsecond\n")))
    assert read_texts("-") == ["first", "second"]


def test_bad_input_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nalso fine\n\xff\xfe broken\n")
    with pytest.raises(InputError, match=r"bad.txt:3: not valid UTF-8"):
        read_texts(str(bad))
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "ok"}\n{"txt": "no"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: expected a JSON object"):
        read_texts(str(bad_json))
    assert main(["embed", "minilm", "--input", str(tmp_path / "missing.txt"), "--output", str(tmp_path / "o.npy")]) == 2
    assert "input file not found" in capsys.readouterr().err


def test_similarity_prints_the_cosine(capsys):
    assert main(["similarity", "minilm", "A man plays a guitar.", "A man plays guitar."]) == 0
    printed = float(capsys.readouterr().out)
    expected = embedlab.load("minilm").similarity([("A man plays a guitar.", "A man plays guitar.")])[0]
    assert abs(printed - expected) < 1e-6 and printed > 0.9


def test_a_pairwise_method_has_no_vectors_to_embed(tmp_path, capsys):
    source = tmp_path / "texts.txt"
    source.write_text("A man plays a guitar.\n", encoding="utf-8")
    output = tmp_path / "out.npy"
    assert main(["embed", "match:minilm", "--input", str(source), "--output", str(output), "--no-progress"]) == 2
    assert "pairwise" in capsys.readouterr().err and not output.exists()
