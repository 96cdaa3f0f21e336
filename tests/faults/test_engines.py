"""Corpus embedding under bad input and faults: every bad input names its file and line before anything is
written; an unwritable folder or a too-small disk fails before the work starts; a full disk mid-run and a
damaged shard never leave a partial shard that is read back."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import embedlab
from embedlab.data import DataFormatError
from embedlab.engines.runner import embed_corpus
from embedlab.engines.shards import OutputFolderError, read_shards
from tolerance import UNIT_ATOL


@pytest.mark.parametrize(("name", "content", "message"), [
    ("bad.txt", b"A man plays.\nA woman reads.\nbroken \xff here\n", "bad.txt:3: not valid UTF-8"),
    ("blank.txt", b"A man plays.\n\nA woman reads.\n", "blank.txt:2: empty line"),
    ("notext.jsonl", b'{"text": "A man plays."}\n{"body": "A woman reads."}\n', "notext.jsonl:2: the record has no 'text' field"),
    ("empty.jsonl", b'{"text": "A man plays."}\n{"text": "  "}\n', "empty.jsonl:2: 'text' is empty"),
    ("broken.jsonl", b'{"text": "A man plays."}\n{"text": \n', "broken.jsonl:2: not valid JSON"),
    ("surrogate.jsonl", b'{"text": "bad \\udc80"}\n', "surrogate.jsonl:1: 'text' has a lone surrogate"),
    ("repeated.jsonl", b'{"id": 1, "text": "A man plays."}\n{"id": 1, "text": "A woman reads."}\n', "repeated.jsonl:2: id 1 is repeated"),
    ("mixed.jsonl", b'{"id": 1, "text": "A man plays."}\n{"text": "A woman reads."}\n', "mixed.jsonl:2: no 'id', but the records before have an integer 'id'"),
    ("boolean.jsonl", b'{"id": true, "text": "A man plays."}\n', "boolean.jsonl:1: 'id' must be an integer or a string"),
    ("noheader.csv", b"sentence,label\nA man plays.,1\n", "noheader.csv:1: the header row 'sentence,label' has no 'text' column"),
    ("fields.csv", b"id,text\n1,A man plays.\n2,A woman,reads.\n", "fields.csv:3: expected 2 fields (id, text), found 3"),
    ("emptytext.tsv", b"text\tid\nA man plays.\ta\n\tb\n", "emptytext.tsv:3: 'text' is empty"),
])
def test_bad_input_names_file_and_line_and_writes_nothing(tmp_path, name, content, message):
    source = tmp_path / name
    source.write_bytes(content)
    with pytest.raises(DataFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        embed_corpus("random:minilm", source, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_bad_parquet_input_names_file_and_row(tmp_path):
    source = tmp_path / "texts.parquet"
    pq.write_table(pa.table({"text": ["A man plays.", None]}), source)
    with pytest.raises(DataFormatError, match=r"texts.parquet: row 2: 'text' is null"):
        embed_corpus("random:minilm", source, tmp_path / "out", progress=False)
    pq.write_table(pa.table({"sentence": ["A man plays."]}), source)
    with pytest.raises(DataFormatError, match=r"texts.parquet: no 'text' column \(columns: sentence\)"):
        embed_corpus("random:minilm", source, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


@pytest.fixture
def texts_file(tmp_path, sts_sentences) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(sts_sentences[:12]) + "\n", encoding="utf-8")
    return path


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_output_folder_fails_before_the_work(tmp_path, texts_file, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    monkeypatch.setattr("embedlab.engines.runner.load_vector_method", lambda spec: pytest.fail("loaded the method first"))
    try:
        with pytest.raises(OutputFolderError, match=r"locked is not writable \(Permission denied\); nothing was written"):
            embed_corpus("minilm", texts_file, locked / "out", progress=False)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_a_read_only_file_system_fails_before_the_work(texts_file, monkeypatch):
    """sysfs takes no new files, even from root (whom permission bits do not stop), so this runs everywhere."""
    try:
        with tempfile.TemporaryFile(dir="/sys"):
            pytest.skip("/sys takes new files on this machine")
    except OSError:
        pass
    monkeypatch.setattr("embedlab.engines.runner.load_vector_method", lambda spec: pytest.fail("loaded the method first"))
    with pytest.raises(OutputFolderError, match=r"--out /sys/embedlab-vectors: /sys is not writable \(.*\); nothing was written"):
        embed_corpus("minilm", texts_file, "/sys/embedlab-vectors", progress=False)
    assert not Path("/sys/embedlab-vectors").exists()


def test_a_disk_too_small_for_the_shards_fails_before_the_work(tmp_path, texts_file, monkeypatch, isolated_cache):
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    monkeypatch.setattr("embedlab.methods.base.VectorMethod.encode", lambda *a, **k: pytest.fail("encoded before the disk check"))
    with pytest.raises(OutputFolderError, match=r"the shards need about 0.0 MB \(12 vectors of 384 float32\) and the disk has 0.0 MB free"):
        embed_corpus("random:minilm", texts_file, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_full_disk_mid_run_leaves_only_whole_listed_shards(tmp_path, texts_file, monkeypatch, isolated_cache):
    real_writev = os.writev

    def full_disk_at_shard_two(descriptor, buffers):
        if "shard-00002.parquet" in os.readlink(f"/proc/self/fd/{descriptor}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writev(descriptor, buffers)

    out = tmp_path / "out"
    monkeypatch.setattr(os, "writev", full_disk_at_shard_two)
    with pytest.raises(OSError, match="No space left on device"):
        embed_corpus("random:minilm", texts_file, out, shard_size=4, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [entry["file"] for entry in manifest["shards"]] == ["shard-00000.parquet", "shard-00001.parquet"]
    # random:minilm is pooled: its (text-independent) fitted state is stored before the first shard
    assert sorted(path.name for path in out.iterdir()) == ["fitted-0.safetensors", "manifest.json", "shard-00000.parquet", "shard-00001.parquet"]
    monkeypatch.setattr(os, "writev", real_writev)
    result = embed_corpus("random:minilm", texts_file, out, shard_size=4, progress=False)
    assert (result.shards_reused, result.shards_written) == (2, 1)


@pytest.mark.crosspath
def test_a_damaged_shard_is_refused_on_read_and_rewritten_on_rerun(tmp_path, texts_file, isolated_cache, sts_sentences):
    out = tmp_path / "out"
    embed_corpus("random:minilm", texts_file, out, shard_size=5, progress=False)
    shard = out / "shard-00001.parquet"
    damaged = bytearray(shard.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    shard.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="shard-00001.parquet is missing or does not match its manifest checksum"):
        read_shards(out)
    result = embed_corpus("random:minilm", texts_file, out, shard_size=5, progress=False)
    assert (result.shards_reused, result.shards_written) == (2, 1)
    # shards of 5 vs one encode call: float32 rounding (unit-scale vectors)
    np.testing.assert_allclose(read_shards(out)[1], embedlab.load("random:minilm").encode(sts_sentences[:12]), atol=UNIT_ATOL)


def test_other_files_stdin_and_pairwise_methods_are_refused(tmp_path, texts_file):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.md").write_text("mine")
    with pytest.raises(OutputFolderError, match="holds other files and no manifest.json"):
        embed_corpus("random:minilm", texts_file, tmp_path / "busy", progress=False)
    with pytest.raises(ValueError, match="standard input has no identity to resume from"):
        embed_corpus("random:minilm", "-", tmp_path / "out", progress=False)
    with pytest.raises(ValueError, match="pairwise method"):
        embed_corpus("match:minilm", texts_file, tmp_path / "out", progress=False)
    assert (tmp_path / "busy" / "notes.md").read_text() == "mine" and not (tmp_path / "out").exists()
