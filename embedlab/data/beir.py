"""Retrieval sets: a BEIR folder read in place, and duplicate-question retrieval built from the QQP sample.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/<split>.tsv`` (a header, then ``query-id``, ``corpus-id``, ``score``). A document's text is
``(title + " " + text).strip()``, as BEIR and MTEB build it, and "empty" means empty after that join.

Why the corpus is streamed: a user's corpus may be larger than memory. :func:`check_beir_folder` reads every
file once (each problem named by file and line, before any encoding) and keeps only the ids; the texts are
read again, block by block, when they are encoded (:meth:`RetrievalSet.document_blocks`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from embedlab.data import DataFormatError, json_object, unicode_problem
from embedlab.data.reading import read_text, special_file_kind
from embedlab.runtime.settings import data_path

QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass
class RetrievalSet:
    """Queries, relevance judgements and a corpus (in memory, or a ``corpus.jsonl`` read block by block).

    ``qrels[query_id][doc_id]`` is the judged grade (≥ 1: relevant; nDCG's gain); ``queries`` holds only the
    judged queries, in file order; ``skipped_queries`` counts the queries without any judgement (BEIR skips them);
    ``ignore_identical_ids``: a document whose id is the query's own id is never a result (BEIR's
    ``EvaluateRetrieval`` default, which MTEB keeps).
    """

    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    doc_ids: list[str]
    corpus_file: Path | None = None
    documents: list[str] | None = None
    skipped_queries: int = 0
    ignore_identical_ids: bool = False
    identity: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.doc_ids)

    def document_blocks(self, block: int) -> Iterator[list[str]]:
        """The document texts in corpus order, ``block`` at a time (a file is read lazily)."""
        if self.documents is not None:
            for start in range(0, len(self.documents), block):
                yield self.documents[start:start + block]
            return
        texts: list[str] = []
        for _, _, text in _corpus_rows(self.corpus_file):
            texts.append(text)
            if len(texts) == block:
                yield texts
                texts = []
        if texts:
            yield texts


def document_text(title: object, text: object) -> str:
    """BEIR's and MTEB's document text: the title, a space and the text, stripped."""
    return (f"{title or ''} {text or ''}").strip()


def _corpus_rows(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, id, text) of every record of a ``corpus.jsonl``, checked one at a time."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = _decoded(raw, path, number)
            if not line.strip():
                continue
            row = json_object(line, f"{path}, line {number}")
            doc_id = _identifier(row, path, number)
            title, text = row.get("title", ""), row.get("text")
            if text is None:
                raise DataFormatError(f"{path}, line {number}: the record has no 'text' field")
            if not isinstance(text, str) or not isinstance(title, (str, type(None))):
                raise DataFormatError(f"{path}, line {number}: 'title' and 'text' must be strings")
            joined = document_text(title, text)
            if not joined:
                raise DataFormatError(f"{path}, line {number}: document {doc_id!r} is empty (title and text)")
            if problem := unicode_problem(joined):
                raise DataFormatError(f"{path}, line {number}: document {doc_id!r} has a {problem}")
            yield number, doc_id, joined


def _decoded(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}, line {number}: not valid UTF-8 ({error.reason} at byte {error.start})") from None


def _identifier(row: dict, path: Path, number: int) -> str:
    if "_id" not in row:
        raise DataFormatError(f"{path}, line {number}: the record has no '_id' field")
    value = row["_id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise DataFormatError(f"{path}, line {number}: '_id' must be a non-empty string or integer")
    return str(value)


def _queries(path: Path) -> dict[str, tuple[int, str]]:
    queries: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        row = json_object(line.removeprefix("\ufeff"), f"{path}, line {number}")
        query_id = _identifier(row, path, number)
        text = row.get("text")
        if not isinstance(text, str):
            raise DataFormatError(f"{path}, line {number}: query {query_id!r} needs a string 'text'")
        if not text.strip():
            raise DataFormatError(f"{path}, line {number}: query {query_id!r} is empty")
        if query_id in queries:
            raise DataFormatError(f"{path}, line {number}: query id {query_id!r} repeats line {queries[query_id][0]}")
        queries[query_id] = (number, text.strip())
    return queries


def _qrels(path: Path, queries: dict[str, tuple[int, str]], doc_lines: dict[str, int]) -> dict[str, dict[str, int]]:
    rows = csv.reader(io.StringIO(read_text(path)), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(rows, None)
    if header is None or tuple(name.strip() for name in header[:3]) != QRELS_HEADER:
        raise DataFormatError(f"{path}, line 1: expected the header {' '.join(QRELS_HEADER)} (tab-separated)")
    qrels: dict[str, dict[str, int]] = {}
    judged_on: dict[tuple[str, str], int] = {}  # (query, document) → the line that judged it
    for number, fields in enumerate(rows, start=2):
        if not any(value.strip() for value in fields):
            continue
        if len(fields) < 3:
            raise DataFormatError(f"{path}, line {number}: expected 3 tab-separated fields, found {len(fields)}")
        query_id, doc_id, score = (value.strip() for value in fields[:3])
        if query_id not in queries:
            raise DataFormatError(f"{path}, line {number}: query id {query_id!r} is not in queries.jsonl")
        if doc_id not in doc_lines:
            raise DataFormatError(f"{path}, line {number}: corpus id {doc_id!r} is not in corpus.jsonl")
        try:
            grade = int(score)
        except ValueError:
            raise DataFormatError(f"{path}, line {number}: score {score!r} is not an integer") from None
        earlier = qrels.get(query_id, {}).get(doc_id)
        if earlier is not None and earlier != grade:
            raise DataFormatError(f"{path}, line {number}: query {query_id!r} and document {doc_id!r} are judged {grade} here "
                                  f"and {earlier} on line {judged_on[(query_id, doc_id)]}; keep one grade")
        judged_on.setdefault((query_id, doc_id), number)
        qrels.setdefault(query_id, {})[doc_id] = grade
    if not any(grade >= 1 for judged in qrels.values() for grade in judged.values()):
        raise DataFormatError(f"{path}: no query has a relevant document (a score ≥ 1); nothing can be measured")
    return qrels


def _warn_own_ids(path: Path, qrels: dict[str, dict[str, int]]) -> None:
    """Warn about relevant documents that share their query's id: BEIR's rule (kept by MTEB and here) never
    returns a query's own id, so such a document can never be found and caps the query's scores."""
    own = [query_id for query_id, judged in qrels.items() if judged.get(query_id, 0) >= 1]
    if own:
        warnings.warn(f"{path}: query {own[0]!r} judges the document with its own id relevant ({len(own)} such queries); "
                      "a query's own id is never a result (BEIR's ignore_identical_ids), so it is never found",
                      UserWarning, stacklevel=3)


def beir_folder(folder: str | Path, split: str = "test") -> RetrievalSet:
    """A BEIR folder, every file checked (errors name file and line); the corpus stays on disk."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise DataFormatError(f"{root} is not a folder; a retrieval set is a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    paths = {"corpus": root / "corpus.jsonl", "queries": root / "queries.jsonl", "qrels": root / "qrels" / f"{split}.tsv"}
    for what, path in paths.items():
        if not path.is_file():
            compressed = path.with_name(path.name + ".gz")
            hint = f"; {compressed.name} is there: decompress it (gunzip -k {compressed})" if compressed.is_file() else ""
            raise DataFormatError(f"{root}: no {path.relative_to(root)} (a BEIR folder needs corpus.jsonl, queries.jsonl "
                                  f"and qrels/<split>.tsv; split {split!r}){hint}")
        if kind := special_file_kind(path):
            raise DataFormatError(f"{path} is {kind}, not a regular file")
    doc_lines: dict[str, int] = {}
    for number, doc_id, _ in _corpus_rows(paths["corpus"]):
        if doc_id in doc_lines:
            raise DataFormatError(f"{paths['corpus']}, line {number}: document id {doc_id!r} repeats line {doc_lines[doc_id]}")
        doc_lines[doc_id] = number
    if not doc_lines:
        raise DataFormatError(f"{paths['corpus']}: the corpus holds no document")
    queries = _queries(paths["queries"])
    qrels = _qrels(paths["qrels"], queries, doc_lines)
    judged = {query_id: text for query_id, (_, text) in queries.items() if query_id in qrels}
    _warn_own_ids(paths["qrels"], qrels)
    return RetrievalSet(root.name, judged, qrels, list(doc_lines), corpus_file=paths["corpus"],
                        skipped_queries=len(queries) - len(judged), ignore_identical_ids=True)


def folder_digest(folder: str | Path, split: str = "test") -> str:
    """SHA-256 of the three files a split reads (streamed), so a stored result names its data's content."""
    root = Path(folder).expanduser()
    digest = hashlib.sha256(split.encode())
    for path in (root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{split}.tsv"):
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def qqp_retrieval() -> RetrievalSet:
    """Duplicate-question retrieval from the QQP sample, built as MTEB's QuoraRetrieval is: the corpus is every
    distinct question (by QQP's question id), the queries are the questions that have a duplicate, a query's
    relevant documents are its direct duplicates (labelled pairs, no transitive closure), and a query's own
    document is never a result."""
    path = data_path("paraphrase", "qqp", "quora_duplicate_questions_first10000.tsv")
    reader = csv.reader(io.StringIO(read_text(path)), delimiter="\t")
    header = next(reader)
    columns = {name: header.index(name) for name in ("qid1", "qid2", "question1", "question2", "is_duplicate")}
    texts: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for fields in reader:
        first, second = fields[columns["qid1"]], fields[columns["qid2"]]
        texts.setdefault(first, fields[columns["question1"]].strip())
        texts.setdefault(second, fields[columns["question2"]].strip())
        if fields[columns["is_duplicate"]] == "1":
            qrels.setdefault(first, {})[second] = 1
            qrels.setdefault(second, {})[first] = 1
    empty = [question_id for question_id, text in texts.items() if not text]
    doc_ids = [question_id for question_id in texts if question_id not in empty]
    qrels = {query: {doc: grade for doc, grade in judged.items() if doc not in empty}
             for query, judged in qrels.items() if query not in empty}
    qrels = {query: judged for query, judged in qrels.items() if judged}
    queries = {question_id: texts[question_id] for question_id in doc_ids if question_id in qrels}
    return RetrievalSet("qqp", queries, qrels, doc_ids, documents=[texts[d] for d in doc_ids], ignore_identical_ids=True)
