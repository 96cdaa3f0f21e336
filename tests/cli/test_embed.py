"""``embedlab embed`` and ``embedlab similarity``: input files (lines, JSON lines, stdin), errors that name
the file and line, outputs equal to the Python API's, and ``--out FOLDER`` shard folders."""

import io

import numpy as np
import pytest

import embedlab
from embedlab.cli.app import main
from embedlab.data import DataFormatError
from embedlab.data.corpus import Corpus
from embedlab.engines.shards import read_shards
from tolerance import UNIT_ATOL


@pytest.mark.crosspath
def test_embed_lines_file(tmp_path, capsys):
    source = tmp_path / "texts.txt"
    source.write_text("A man plays a guitar.\nA woman reads.\n", encoding="utf-8")
    output = tmp_path / "out.npy"
    assert main(["embed", "minilm", "--input", str(source), "--output", str(output), "--no-progress"]) == 0
    vectors = np.load(output, allow_pickle=False)
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    # the command's encode call vs this one: float32 rounding at most (unit-scale vectors)
    np.testing.assert_allclose(vectors, embedlab.load("minilm").encode(["A man plays a guitar.", "A woman reads."]), atol=UNIT_ATOL)


def test_embed_json_lines_and_stdin(tmp_path, monkeypatch):
    source = tmp_path / "texts.jsonl"
    source.write_text('{"text": "one", "id": 1}\n{"text": "two", "id": 5}\n', encoding="utf-8")
    assert Corpus(source).read_all() == ([1, 5], ["one", "two"])
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"first\nsecond\n")))
    assert Corpus("-").read_all() == ([1, 2], ["first", "second"])


def test_bad_input_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nalso fine\n\xff\xfe broken\n")
    with pytest.raises(DataFormatError, match=r"bad.txt:3: not valid UTF-8"):
        Corpus(bad).read_all()
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "ok"}\n{"txt": "no"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.jsonl:2: the record has no 'text' field"):
        Corpus(bad_json).read_all()
    assert main(["embed", "minilm", "--input", str(tmp_path / "missing.txt"), "--output", str(tmp_path / "o.npy")]) == 2
    assert "input file not found" in capsys.readouterr().err


@pytest.mark.crosspath
def test_embed_to_a_folder_writes_resumable_shards(tmp_path, capsys, sts_sentences):
    source = tmp_path / "texts.csv"
    source.write_text("id,text\n" + "".join(f'{index},"{text}"\n' for index, text in enumerate(sts_sentences[:5])), encoding="utf-8")
    out = tmp_path / "vectors"
    assert main(["embed", "minilm", "--input", str(source), "--out", str(out), "--shard-size", "2"]) == 0
    assert "5 x 384 float32 vectors" in capsys.readouterr().err
    assert sorted(path.name for path in out.iterdir()) == [
        "fitted-0.safetensors", "manifest.json", "shard-00000.parquet", "shard-00001.parquet", "shard-00002.parquet"]
    ids, vectors = read_shards(out)
    assert ids == ["0", "1", "2", "3", "4"]
    np.testing.assert_allclose(vectors, embedlab.load("minilm").encode(sts_sentences[:5]), atol=UNIT_ATOL)  # shards vs one batch
    assert main(["embed", "minilm", "--input", str(source), "--out", str(out), "--shard-size", "2"]) == 0
    assert "0 shard(s) written, 3 finished shard(s) kept" in capsys.readouterr().err
    assert main(["embed", "minilm", "--input", str(source), "--out", str(out), "--quiet"]) == 2
    assert "holds another run (shard_size: 2 there, 10000 now)" in capsys.readouterr().err


@pytest.mark.crosspath
def test_similarity_prints_the_cosine(capsys):
    assert main(["similarity", "minilm", "A man plays a guitar.", "A man plays guitar."]) == 0
    printed = float(capsys.readouterr().out)
    expected = embedlab.load("minilm").similarity_pairs([("A man plays a guitar.", "A man plays guitar.")])[0]
    assert abs(printed - expected) < 1e-6 and printed > 0.9  # the same call in this process, printed to 6 decimals (≤ 5e-7)


def test_a_pairwise_method_has_no_vectors_to_embed(tmp_path, capsys):
    source = tmp_path / "texts.txt"
    source.write_text("A man plays a guitar.\n", encoding="utf-8")
    output = tmp_path / "out.npy"
    assert main(["embed", "match:minilm", "--input", str(source), "--output", str(output), "--no-progress"]) == 2
    assert "pairwise" in capsys.readouterr().err and not output.exists()


@pytest.mark.crosspath
def test_embed_writes_exactly_the_parquet_path_asked(tmp_path):
    import pyarrow.parquet as pq

    source = tmp_path / "texts.jsonl"
    source.write_text('{"text": "A man plays a guitar.", "id": "a"}\n{"text": "A woman reads.", "id": "b"}\n', encoding="utf-8")
    output = tmp_path / "deeper" / "vectors.parquet"
    assert main(["embed", "minilm", "--input", str(source), "--output", str(output), "--include-text", "--no-progress"]) == 0
    assert sorted(path.name for path in output.parent.iterdir()) == ["vectors.parquet"]  # no temporary file left
    table = pq.read_table(output).to_pydict()
    assert table["id"] == ["a", "b"] and table["text"] == ["A man plays a guitar.", "A woman reads."]
    vectors = np.array(table["vector"], dtype=np.float32)
    np.testing.assert_allclose(vectors, embedlab.load("minilm").encode(table["text"]), atol=UNIT_ATOL)  # the command's batches vs these


@pytest.mark.crosspath
def test_embed_npy_keeps_the_name_and_parquet_ids_default_to_line_numbers(tmp_path):
    import pyarrow.parquet as pq

    source = tmp_path / "texts.txt"
    source.write_text("first\nsecond\nthird\n", encoding="utf-8")
    npy = tmp_path / "vectors.npy"
    assert main(["embed", "random:minilm", "--input", str(source), "--output", str(npy), "--no-progress"]) == 0
    vectors = np.load(npy, allow_pickle=False)
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous and vectors.shape == (3, 384)
    parquet = tmp_path / "vectors.parquet"
    assert main(["embed", "random:minilm", "--input", str(source), "--output", str(parquet), "--no-progress"]) == 0
    table = pq.read_table(parquet)
    assert table.column_names == ["id", "vector"] and table["id"].to_pylist() == [1, 2, 3]
    # bit-identical by construction: the same command on the same three texts, written as float32 both times
    np.testing.assert_array_equal(np.array(table["vector"].to_pylist(), dtype=np.float32), vectors)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("/dev/full", "exists and is not a folder"),
        ("{tmp}/vectors.txt", "is not a format embed writes"),
        ("{tmp}/a-file/shards", "a-file is a file, not a folder"),
        ("{tmp}/a-file/vectors.npy", "a-file is a file, not a folder"),
    ],
)
def test_an_unwritable_output_fails_before_encoding(tmp_path, capsys, monkeypatch, output, message):
    source = tmp_path / "texts.txt"
    source.write_text("A text.\n", encoding="utf-8")
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    monkeypatch.setattr(embedlab, "load", lambda spec: pytest.fail("encoded before checking the output"))
    assert main(["embed", "minilm", "--input", str(source), "--output", output.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "texts.txt"]


def test_a_full_disk_leaves_no_file(tmp_path, capsys, monkeypatch):
    import errno
    import os

    source = tmp_path / "texts.txt"
    source.write_text("A text.\n", encoding="utf-8")
    output = tmp_path / "out" / "vectors.npy"
    real_writev = os.writev

    def full_disk(descriptor, buffers):  # like /dev/full, but only for the output's temporary file
        if "vectors.npy" in os.readlink(f"/proc/self/fd/{descriptor}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writev(descriptor, buffers)

    monkeypatch.setattr(os, "writev", full_disk)
    assert main(["embed", "random:minilm", "--input", str(source), "--output", str(output), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "nothing was written" in err and str(output) in err
    assert list(output.parent.iterdir()) == []


def test_quantised_outputs_keep_their_integer_type_and_say_so(tmp_path, capsys):
    """precision=ubinary → a uint8 (n, 48) .npy equal to encode's bytes; int8 → Parquet lists of int8; the
    folder's message states the stored type and width (it said "384 float32 vectors")."""
    source = tmp_path / "texts.txt"
    source.write_text("A man plays a guitar.\nA woman reads.\nStocks fell.\n", encoding="utf-8")
    binary = tmp_path / "bits.npy"
    assert main(["embed", "random:minilm,precision=ubinary", "--input", str(source), "--out", str(binary)]) == 0
    vectors = np.load(binary, allow_pickle=False)
    assert vectors.dtype == np.uint8 and vectors.shape == (3, 48)
    expected = embedlab.load("random:minilm,precision=ubinary").encode(["A man plays a guitar.", "A woman reads.", "Stocks fell."])
    assert np.array_equal(vectors, expected)  # the same bytes: one encode call each, nothing cast
    assert "wrote 3 x 48 uint8 vectors (precision=ubinary: 384 bits, 8 to a byte)" in capsys.readouterr().err
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert main(["embed", "random:minilm,precision=int8", "--input", str(source), "--out", str(tmp_path / "v.parquet")]) == 0
    assert pq.read_table(tmp_path / "v.parquet").schema.field("vector").type == pa.list_(pa.int8(), 384)
    assert "wrote 3 x 384 int8 vectors" in capsys.readouterr().err
    assert main(["embed", "random:minilm,precision=ubinary", "--input", str(source), "--out", str(tmp_path / "folder")]) == 0
    assert "3 x 48 uint8 vectors (precision=ubinary: 384 bits, 8 to a byte) in" in capsys.readouterr().err
