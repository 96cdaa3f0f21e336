"""BEIR folders and the QQP retrieval set: the document text, the counts, and every bad input named by file and line."""

from __future__ import annotations

import json
import warnings

import pytest

from embedlab.data import DataFormatError
from embedlab.data.beir import beir_folder, document_text, qqp_retrieval

CORPUS = [{"_id": "d1", "title": "Guitar", "text": "A man plays."}, {"_id": "d2", "title": "", "text": "Stocks fell."},
          {"_id": "d3", "text": "Pasta for dinner."}]
QUERIES = [{"_id": "q1", "text": "music"}, {"_id": "q2", "text": "markets"}, {"_id": "q3", "text": "never judged"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\nq2\td3\t0\n"


def write_folder(root, corpus=CORPUS, queries=QUERIES, qrels=QRELS, split="test"):
    root.mkdir(exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries), encoding="utf-8")
    (root / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_a_folder_reads_as_beir_builds_it(tmp_path):
    data = beir_folder(write_folder(tmp_path / "set"))
    assert data.doc_ids == ["d1", "d2", "d3"]
    assert [text for block in data.document_blocks(2) for text in block] == ["Guitar A man plays.", "Stocks fell.", "Pasta for dinner."]
    assert data.queries == {"q1": "music", "q2": "markets"}  # q3 has no judgement: skipped and counted
    assert data.skipped_queries == 1
    assert data.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1, "d3": 0}}
    assert data.ignore_identical_ids
    assert document_text(None, " x ") == "x" and document_text("T", "") == "T"


@pytest.mark.parametrize("change, message", [
    (lambda root: (root / "corpus.jsonl").unlink(), "no corpus.jsonl"),
    (lambda root: write_folder(root, corpus=CORPUS + [{"_id": "d1", "text": "again"}]), "corpus.jsonl, line 4: document id 'd1' repeats line 1"),
    (lambda root: write_folder(root, queries=QUERIES + [{"_id": "q1", "text": "again"}]), "queries.jsonl, line 4: query id 'q1' repeats line 1"),
    (lambda root: write_folder(root, corpus=CORPUS + [{"_id": "d4", "title": " ", "text": ""}]), "corpus.jsonl, line 4: document 'd4' is empty"),
    (lambda root: write_folder(root, queries=QUERIES + [{"_id": "q4", "text": "  "}]), "queries.jsonl, line 4: query 'q4' is empty"),
    (lambda root: write_folder(root, qrels=QRELS + "q9\td1\t1\n"), "test.tsv, line 5: query id 'q9' is not in queries.jsonl"),
    (lambda root: write_folder(root, qrels=QRELS + "q1\td9\t1\n"), "test.tsv, line 5: corpus id 'd9' is not in corpus.jsonl"),
    (lambda root: write_folder(root, qrels=QRELS + "q1\td2\t0.5\n"), "test.tsv, line 5: score '0.5' is not an integer"),
    (lambda root: write_folder(root, qrels="query-id\tcorpus-id\tscore\nq1\td1\t0\n"), "no query has a relevant document"),
    (lambda root: write_folder(root, qrels="q1\td1\t1\n"), "test.tsv, line 1: expected the header"),
    (lambda root: write_folder(root, qrels=QRELS + "q1\td1\t1\n"),
     "test.tsv, line 5: query 'q1' and document 'd1' are judged 1 here and 2 on line 2"),
])
def test_bad_folders_are_refused_naming_file_and_line(tmp_path, change, message):
    root = write_folder(tmp_path / "set")
    change(root)
    with pytest.raises(DataFormatError, match=message.replace("(", r"\(").replace(".", r"\.")):
        beir_folder(root)


def test_a_repeated_judgement_of_the_same_grade_is_kept_and_a_gz_corpus_is_named(tmp_path):
    assert beir_folder(write_folder(tmp_path / "same", qrels=QRELS + "q1\td1\t2\n")).qrels["q1"] == {"d1": 2}
    root = write_folder(tmp_path / "gz")
    (root / "corpus.jsonl").rename(root / "corpus.jsonl.gz")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl\.gz is there: decompress it"):
        beir_folder(root)


def test_a_relevant_document_with_its_query_s_own_id_is_warned_about(tmp_path):
    """BEIR never returns a query's own id, so judging it relevant caps that query: said once, with the count."""
    queries = QUERIES + [{"_id": "d3", "text": "pasta"}]
    root = write_folder(tmp_path / "set", queries=queries, qrels=QRELS + "d3\td3\t1\nd3\td1\t1\n")
    with pytest.warns(UserWarning, match="query 'd3' judges the document with its own id relevant \\(1 such queries\\)"):
        data = beir_folder(root)
    assert data.qrels["d3"] == {"d3": 1, "d1": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        beir_folder(write_folder(tmp_path / "plain"))  # no own-id judgement: silent


def test_an_absent_split_names_what_a_folder_needs(tmp_path):
    with pytest.raises(DataFormatError, match="no qrels/dev.tsv"):
        beir_folder(write_folder(tmp_path / "set"), split="dev")


def test_qqp_retrieval_counts_and_rules():
    """MTEB's QuoraRetrieval construction on the 10,000-row sample: every distinct question is a document, the
    questions with a duplicate are the queries, direct duplicates are relevant (7,422 judgements, both ways)."""
    data = qqp_retrieval()
    assert (data.size, len(data.queries), sum(map(len, data.qrels.values()))) == (19413, 7018, 7422)
    assert data.ignore_identical_ids and data.skipped_queries == 0
    assert all(query not in judged for query, judged in data.qrels.items())  # a question is never its own duplicate
    assert all(data.qrels[doc][query] == 1 for query, judged in data.qrels.items() for doc in judged)  # symmetric
