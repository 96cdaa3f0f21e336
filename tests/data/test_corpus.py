"""Lazy corpus readers: every format gives the same STS-B sentences and ids, and reading from a shard's
start position gives exactly the records a full read gives from there on."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embedlab.data.corpus import Corpus, corpus_format


@pytest.fixture
def sentences(sts_sentences) -> list[str]:
    return sts_sentences[:25]


def _write(tmp_path, name: str, sentences: list[str], with_ids: bool):
    path = tmp_path / name
    ids = [f"doc-{index}" for index in range(len(sentences))]
    if name.endswith(".txt"):
        path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    elif name.endswith(".jsonl"):
        rows = [{"id": key, "text": text} if with_ids else {"text": text} for key, text in zip(ids, sentences)]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif name.endswith((".csv", ".tsv")):
        with path.open("w", encoding="utf-8", newline="") as file:
            options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE, "escapechar": None} if name.endswith(".tsv") else {}
            writer = csv.writer(file, **options)
            writer.writerow(["id", "text"] if with_ids else ["text"])
            writer.writerows([[key, text] for key, text in zip(ids, sentences)] if with_ids else [[text] for text in sentences])
    else:
        columns = {"text": sentences, **({"id": ids} if with_ids else {})}
        pq.write_table(pa.table(columns), path, row_group_size=7)  # several row groups: skipping them is exercised
    return path


@pytest.mark.parametrize("name", ["texts.txt", "texts.jsonl", "texts.csv", "texts.tsv", "texts.parquet"])
def test_every_format_reads_the_same_texts_and_ids(tmp_path, sentences, name):
    with_ids = not name.endswith(".txt")
    corpus = Corpus(_write(tmp_path, name, sentences, with_ids))
    ids, texts = corpus.read_all()
    assert texts == sentences
    if with_ids:
        assert ids == [f"doc-{index}" for index in range(len(sentences))]
    else:
        assert ids == list(range(1, len(sentences) + 1))  # line numbers
    scan = corpus.scan(shard_size=10)
    assert scan.count == len(sentences) and scan.id_kind == ("str" if with_ids else "line")
    assert len(scan.shard_starts) == 3
    for shard, start in enumerate(scan.shard_starts):  # each shard read from its own start position
        records = list(corpus.records(start))
        assert [record.text for record in records] == sentences[shard * 10:]


@pytest.mark.parametrize("name", ["texts.jsonl", "texts.csv", "texts.tsv", "texts.parquet"])
def test_ids_default_to_line_or_row_numbers(tmp_path, sentences, name):
    ids, _ = Corpus(_write(tmp_path, name, sentences[:4], with_ids=False)).read_all()
    # a header row is line 1 of a CSV/TSV file; JSON lines start at line 1; Parquet rows count from 1
    assert ids == ([2, 3, 4, 5] if name.endswith((".csv", ".tsv")) else [1, 2, 3, 4])


def test_csv_quoted_commas_and_newlines_keep_their_lines(tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_text('text,id\n"A man, a plan.",7\n"two\nlines",8\nplain,9\n', encoding="utf-8")
    corpus = Corpus(path)
    records = list(corpus.records())
    assert [(record.id, record.text, record.line) for record in records] == [("7", "A man, a plan.", 2), ("8", "two\nlines", 3), ("9", "plain", 5)]
    assert [record.text for record in corpus.records(records[1].after)] == ["plain"]


def test_integer_json_ids_and_blank_json_lines(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text('{"id": 10, "text": "first"}\n\n{"id": 3, "text": "second"}\n', encoding="utf-8")
    corpus = Corpus(path)
    assert corpus.read_all() == ([10, 3], ["first", "second"])
    assert corpus.scan().id_kind == "int"


def test_format_by_suffix_and_by_name():
    assert [corpus_format(name) for name in ("a.jsonl", "a.json", "a.CSV", "a.tsv", "a.parquet", "a.txt", "notes")] == [
        "jsonl", "jsonl", "csv", "tsv", "parquet", "txt", "txt"]
    assert corpus_format("a.txt", "jsonl") == "jsonl" and corpus_format("a.jsonl", "txt") == "txt"


def test_identity_changes_when_the_file_does(tmp_path, sentences):
    path = _write(tmp_path, "texts.txt", sentences, with_ids=False)
    before = Corpus(path).identity()
    path.write_text("\n".join(reversed(sentences)) + "\n", encoding="utf-8")  # same size, other content
    after = Corpus(path).identity()
    assert before["size"] == after["size"] and before["sha256"] != after["sha256"]
