"""Retrieval: rank a corpus for every query by the method's own similarity, score the run as trec_eval does.

Datasets: ``qqp`` (duplicate-question retrieval built from the QQP sample as MTEB's QuoraRetrieval is,
:func:`embedlab.data.beir.qqp_retrieval`) or a user's BEIR folder (``retrieval:@FOLDER``, split ``test``
unless ``split=``). The first stage is exact search (:mod:`embedlab.evaluation.search`) over the corpus
encoded block by block (each block cached, so an interrupted run resumes; a method that fits statistics on
its target encodes queries and corpus in one call instead), or over a shard folder that ``embed --out``
wrote with the same method. ``rerank`` re-scores the first stage's top ``rerank_depth`` with a pairwise
method (token-level matching, BERTScore); its rows are stored under subset ``rerank:<spec>@<depth>``.

Every metric record keeps its per-query values (``UnitScores("queries", "mean", …)``): the value is their mean.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from embedlab.data.beir import RetrievalSet, beir_folder, folder_digest, qqp_retrieval
from embedlab.errors import InputError
from embedlab.evaluation.base import Method, Metric, NotApplicableError, Task
from embedlab.evaluation.cost import report_partial
from embedlab.evaluation.ranking import DEFAULT_CUTOFFS, parse_cutoffs, per_query_metrics, trec_order, write_trec_run
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import encode_texts, score_pairs, unit_rows
from embedlab.evaluation.search import DOC_BLOCK, faiss_top_k, hamming_scores, id_priorities, rescore, top_k
from embedlab.runtime.cache.hashing import file_sha256
from embedlab.runtime.outputs import check_output_file

_MEASURE_TEXT = {
    "ndcg": "nDCG at k (trec_eval ndcg_cut), graded gains, 0–1",
    "map": "mean average precision over the top k (trec_eval map_cut), 0–1",
    "mrr": "reciprocal rank of the first relevant document within the top k, 0–1",
    "recall": "share of the relevant documents found in the top k (trec_eval recall), 0–1",
    "precision": "share of the top k that is relevant (trec_eval P), 0–1",
}
DATA_COUNT = "a count of the data, not an estimate: no interval"
BINARY = ("binary", "ubinary")  # output precisions whose vectors are sign bits (methods' precision= option)
DEFAULT_RERANK_DEPTH = 100
SEARCHES = ("exact", "hnsw")  # hnsw: faiss's approximate graph index (pip install faiss-cpu); the corpus in memory


class RetrievalTask(Task):
    """A corpus ranked for every judged query; nDCG, MAP, MRR, recall and precision at each cut-off k."""

    name = "retrieval"
    description = "rank a corpus for each query by similarity; trec_eval's nDCG, MAP, MRR, recall, precision at k"
    datasets = ("qqp",)
    options = ("split", "k", "run_out", "rerank", "rerank_depth", "corpus_vectors", "search", "rescore")
    user_files = True
    parsing_options = ("split",)
    headline_metric = "ndcg@10"
    metrics = {
        "queries": Metric("judged queries evaluated", "", "count", "count"),
        "skipped_queries": Metric("queries without any judgement, skipped (as BEIR skips them)", "", "count", "count"),
        "documents": Metric("documents in the corpus", "", "count", "count"),
        "rerank_seconds_per_query": Metric("wall time of the rerank stage per query, seconds", "lower", unit="seconds"),
    }

    def __init__(self, dataset: str, *, path: str | None = None, split: str = "test", k: str | tuple = DEFAULT_CUTOFFS,
                 run_out: str | None = None, rerank: Method | None = None, rerank_depth: int | None = None,
                 corpus_vectors: str | None = None, search: str = "exact", rescore: int = 0) -> None:
        super().__init__(dataset)
        if search not in SEARCHES:
            raise InputError(f"unknown search {search!r}; expected one of {', '.join(SEARCHES)}")
        self.path, self.split, self.run_out, self.corpus_vectors, self.search = path, split, run_out, corpus_vectors, search
        self.k = parse_cutoffs(k)
        if path is None and dataset not in self.datasets:
            raise InputError(f"unknown retrieval dataset {dataset!r}; expected one of {', '.join(self.datasets)} or @FOLDER")
        if rerank is not None and not getattr(rerank, "pairwise", False):
            raise InputError(f"--rerank needs a pairwise method (match:…, match:…,mode=bertscore); {rerank.spec!r} has no "
                             "pairwise score of its own (its pair score is the cosine the first stage already ranks by)")
        if rerank is None and rerank_depth is not None:
            raise InputError("--rerank-depth is how many documents --rerank re-scores; without --rerank it does nothing: "
                             "add --rerank SPEC or drop --rerank-depth")
        rerank_depth = DEFAULT_RERANK_DEPTH if rerank_depth is None else rerank_depth
        if rerank_depth < 1:
            raise InputError(f"--rerank-depth must be a positive integer, got {rerank_depth}")
        self.rerank, self.rerank_depth = rerank, int(rerank_depth)
        if run_out is not None:  # the run is written after the search: its path is checked now, before any work
            check_output_file(Path(run_out), inputs=self._input_files(), option="--run-out")
        if isinstance(rescore, bool) or not isinstance(rescore, int) or rescore < 0:
            raise InputError(f"--rescore must be a whole number ≥ 0 (0: off), got {str(rescore)[:40]}")
        self.rescore = rescore
        self._loaded: RetrievalSet | None = None

    def _input_files(self) -> list[Path]:
        """What this task reads, which ``--run-out`` must never replace: the BEIR folder's files and the
        corpus-vectors folder's."""
        files = []
        if self.path is not None:
            root = Path(self.path).expanduser()
            files += [root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{self.split}.tsv"]
        if self.corpus_vectors is not None and Path(self.corpus_vectors).expanduser().is_dir():
            files += [entry for entry in Path(self.corpus_vectors).expanduser().iterdir() if entry.is_file()]
        elif self.corpus_vectors is not None:
            files.append(Path(self.corpus_vectors))
        return files

    @classmethod
    def metric(cls, name: str) -> Metric:
        measure, _, cutoff = name.partition("@")
        if measure in _MEASURE_TEXT and cutoff.isdigit():
            return Metric(_MEASURE_TEXT[measure].replace(" k", f" {cutoff}"), unit="fraction")
        return super().metric(name)

    @classmethod
    def user_dataset_name(cls, path: Path, options: dict) -> str:
        """``folder@digest``: the content of the three files the split reads, so another folder of the same name,
        or another split, never shares stored results."""
        return f"{path.name}@{folder_digest(path, options.get('split', 'test'))[:8]}"

    def settings(self) -> dict:
        """What changes the stored numbers: the split and the cut-offs (a rerank adds rows of its own subset;
        where the run is written and where the corpus vectors came from change nothing)."""
        settings = {}
        if self.split != "test":
            settings["split"] = self.split
        if self.k != DEFAULT_CUTOFFS:
            settings["k"] = ",".join(map(str, self.k))
        if self.search != "exact":
            settings["search"] = self.search
        if self.rescore:
            settings["rescore"] = self.rescore
        return settings

    @property
    def rerank_subset(self) -> str | None:
        return f"rerank:{self.rerank.spec}@{self.rerank_depth}" if self.rerank is not None else None

    def reuses(self, stored: list[Record]) -> bool:
        """Stored rows serve unless the run file is asked for or the asked-for rerank is missing."""
        return self.run_out is None and (self.rerank is None or any(r.subset == self.rerank_subset for r in stored))

    def load(self) -> RetrievalSet:
        """The set, checked once: ``evaluate`` checks every task's data before the first runs, and the run
        reuses that pass instead of reading the corpus and judgements a second time."""
        if self._loaded is None:
            if self.path is None and self.split != "test":
                raise InputError(f"retrieval:{self.dataset} has only the split 'test'")
            self._loaded = beir_folder(self.path, self.split) if self.path is not None else qqp_retrieval()
        return self._loaded

    # -- the run ----------------------------------------------------------------------------------------
    def run(self, method: Method) -> list[Record]:
        self.check(method)
        check_rescore(method, self.rescore)
        data = self.load()
        query_ids = list(data.queries)
        depth = max(max(self.k), self.rerank_depth if self.rerank is not None else 0)
        exclude = None
        if data.ignore_identical_ids:
            position = {doc_id: index for index, doc_id in enumerate(data.doc_ids)}
            exclude = np.array([position.get(query_id, -1) for query_id in query_ids], dtype=np.int64)
        queries, blocks = self._vectors(method, data)
        if getattr(method, "output_precision", "float32") in BINARY:
            indices, scores = self._hamming_top_k(method, data, queries, blocks, depth, exclude)
        elif self.search == "exact":
            indices, scores = top_k(queries, blocks, depth, id_priorities(data.doc_ids), exclude=exclude)
        else:
            indices, scores = _approximate_top_k(queries, np.concatenate(list(blocks)), depth, exclude)
        ranked = {query_id: [data.doc_ids[i] for i in row if i >= 0] for query_id, row in zip(query_ids, indices)}
        if self.run_out is not None:
            write_trec_run(self.run_out, query_ids, [ranked[q][:max(self.k)] for q in query_ids],
                           scores[:, :max(self.k)], method.spec, option="--run-out")
        records = self._counts(method, data, "all") + self._metric_records(method, "all", ranked, data)
        if self.rerank is not None:
            records += self._reranked(method, data, ranked)
        return records

    def _vectors(self, method: Method, data: RetrievalSet) -> tuple[np.ndarray, Iterator[np.ndarray]]:
        """Unit query rows and the corpus's unit rows block by block (inner products are cosines)."""
        query_texts = list(data.queries.values())
        if getattr(method, "fits_on_target", False):  # statistics of its target texts (a user's own model: none):
            # queries and corpus in one encode, as every task encodes its dataset
            if getattr(method, "prompts", {}):
                raise InputError(f"{method.spec}: a method with query/document prompts that fits statistics on its target texts "
                                 "cannot encode both sides in one call; fit it first (method.fit(corpus)) or fit on WikiText-2 (@ref)")
            documents = [text for block in data.document_blocks(DOC_BLOCK) for text in block]
            vectors = encode_texts(method, query_texts + documents)
            return _unit32(vectors[:len(query_texts)]), iter([_unit32(vectors[len(query_texts):])])
        queries = _unit32(encode_texts(method, query_texts, role="query"))
        if self.corpus_vectors is not None:  # the corpus was embedded by another run: its cost is not measured here
            report_partial(f"the corpus vectors were read from {self.corpus_vectors}: only the queries' encode is measured")
            return queries, iter([_unit32(_stored_corpus(method, data, self.corpus_vectors))])
        return queries, (_unit32(encode_texts(method, block, role="document")) for block in data.document_blocks(DOC_BLOCK))

    def _hamming_top_k(self, method: Method, data: RetrievalSet, queries: np.ndarray, blocks: Iterator[np.ndarray], depth: int,
                       exclude: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Binary vectors (their signs) searched by Hamming distance; with ``rescore`` = m, the first m·depth
        candidates re-ranked by the float query against the documents' ±1 bits (sentence-transformers' recipe)."""
        if self.search != "exact":
            raise InputError(f"{method.spec}: binary vectors are searched by Hamming distance; --search {self.search} takes float vectors")
        packed: list[np.ndarray] = []

        def packed_blocks() -> Iterator[np.ndarray]:
            for block in blocks:
                packed.append(np.packbits(block > 0, axis=1))
                yield packed[-1]

        priority = id_priorities(data.doc_ids)
        indices, scores = top_k(np.packbits(queries > 0, axis=1), packed_blocks(), depth * max(1, self.rescore), priority,
                                exclude=exclude, scorer=hamming_scores)
        if not self.rescore:
            return indices, scores
        corpus = np.concatenate(packed)
        float_queries = encode_texts(method, list(data.queries.values()), role="query", precision="float32")
        return rescore(_unit32(float_queries), lambda rows: corpus[rows], indices, depth, priority)

    def _counts(self, method: Method, data: RetrievalSet, subset: str) -> list[Record]:
        return [self.record(method, subset, "queries", len(data.queries), len(data.queries), note=DATA_COUNT),
                self.record(method, subset, "skipped_queries", data.skipped_queries, len(data.queries), note=DATA_COUNT),
                self.record(method, subset, "documents", data.size, data.size, note=DATA_COUNT)]

    def _metric_records(self, method: Method, subset: str, ranked: dict[str, list[str]], data: RetrievalSet) -> list[Record]:
        values = per_query_metrics(ranked, data.qrels, self.k)
        return [self.record(method, subset, metric, float(per_query.mean()), len(per_query),
                            units=UnitScores("queries", "mean", {"score": per_query}))
                for metric, per_query in values.items()]

    def _reranked(self, method: Method, data: RetrievalSet, ranked: dict[str, list[str]]) -> list[Record]:
        """The first stage's top ``rerank_depth`` of each query re-ordered by the pairwise method's score."""
        documents = _document_texts(data, {doc for run in ranked.values() for doc in run[:self.rerank_depth]})
        pairs = [(data.queries[q], documents[d]) for q, run in ranked.items() for d in run[:self.rerank_depth]]
        started = time.perf_counter()
        scores = score_pairs(self.rerank, pairs, cached=False)  # timed: the cost of a rerank, never a cache read
        seconds = (time.perf_counter() - started) / max(1, len(ranked))
        reranked, offset = {}, 0
        for query_id, run in ranked.items():
            head = run[:self.rerank_depth]
            order = trec_order(head, scores[offset:offset + len(head)])
            reranked[query_id] = [head[i] for i in order] + run[self.rerank_depth:]
            offset += len(head)
        subset = self.rerank_subset
        return (self._metric_records(method, subset, reranked, data)
                + [self.record(method, subset, "rerank_seconds_per_query", seconds, len(ranked),
                               note="a wall time of the whole rerank: no interval")])

    def check(self, method: Method) -> None:
        if method.pairwise:
            raise NotApplicableError(f"retrieval needs embedding vectors for its first stage, but {method.spec!r} is a "
                                     f"pairwise method; rerank with it instead (--rerank {method.spec})")


def check_rescore(method: Method, rescore: int) -> None:
    """``rescore`` re-ranks the Hamming candidates of binary vectors; for a float method it would do nothing."""
    if rescore and getattr(method, "output_precision", "float32") not in BINARY:
        raise InputError(f"--rescore {rescore} re-ranks the Hamming candidates of binary vectors, but {method.spec!r} gives "
                         f"{getattr(method, 'output_precision', 'float32')} vectors; add precision=ubinary to the spec or drop --rescore")


def _unit32(vectors: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(unit_rows(vectors), dtype=np.float32)


def _approximate_top_k(queries: np.ndarray, documents: np.ndarray, depth: int, exclude: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """faiss's HNSW search, one more result than asked for so a query's own document can be dropped."""
    indices, scores = faiss_top_k(queries, documents, min(depth + 1, len(documents)), kind="hnsw")
    if exclude is not None:
        own = indices == exclude[:, None]
        scores[own], indices[own] = -np.inf, -1
        order = np.argsort(own, axis=1, kind="stable")  # the dropped one to the end, the rest in faiss's order
        indices, scores = np.take_along_axis(indices, order, axis=1), np.take_along_axis(scores, order, axis=1)
    return indices[:, :depth], scores[:, :depth]


def _document_texts(data: RetrievalSet, wanted: set[str]) -> dict[str, str]:
    """The texts of the ``wanted`` documents, read from the corpus in one pass."""
    texts, ids = {}, iter(data.doc_ids)
    for block in data.document_blocks(DOC_BLOCK):
        for text in block:
            doc_id = next(ids)
            if doc_id in wanted:
                texts[doc_id] = text
    return texts


def _stored_corpus(method: Method, data: RetrievalSet, folder: str) -> np.ndarray:
    """The corpus vectors of a shard folder ``embed --out`` wrote with this very method over this corpus:
    same spec and fingerprint, the corpus's ids in its order, and each document's text (by its stored hash)."""
    from embedlab.engines.shards import OutputFolder, read_shards

    if not Path(folder).expanduser().is_dir():
        raise InputError(f"--corpus-vectors {folder} is not a folder; give the shard folder `embed --input corpus.jsonl "
                         "--out FOLDER` wrote (a single .npy or .parquet file holds no manifest to check it against)")
    manifest = OutputFolder(folder).read_manifest()
    if manifest is None:
        raise InputError(f"--corpus-vectors {folder} holds no manifest.json: not a shard folder `embed --out FOLDER` wrote")
    if manifest.get("spec") != method.spec or manifest.get("method_fingerprint") != method.fingerprint:
        raise InputError(f"--corpus-vectors {folder} holds {manifest.get('spec')!r} vectors (model {manifest.get('method_fingerprint')}), "
                         f"not {method.spec!r} ({method.fingerprint}); embed the corpus with the same spec")
    if "document" in getattr(method, "prompts", {}):
        raise InputError(f"--corpus-vectors: {method.spec!r} encodes documents with its doc_template, which `embed` does not "
                         "apply; drop --corpus-vectors")
    if method.fits_on_target:
        raise InputError(f"--corpus-vectors: {method.spec!r} fits statistics on its target texts, so stored corpus vectors "
                         "cannot be matched by queries encoded here; drop --corpus-vectors")
    ids, vectors = read_shards(folder)
    if [str(i) for i in ids] != data.doc_ids:
        raise InputError(f"--corpus-vectors {folder}: its ids are not the corpus's document ids in corpus order "
                         f"({len(ids)} rows for {data.size} documents); embed this corpus.jsonl")
    _check_stored_texts(folder, manifest, data)
    return vectors


def _check_stored_texts(folder: str, manifest: dict, data: RetrievalSet) -> None:
    """Refuse stored vectors of other texts under the same ids, naming the first document that differs.

    A folder written before per-text hashes were stored passes only if it was embedded from this very
    corpus file (the manifest's input SHA-256); otherwise its texts cannot be checked and it is refused."""
    from embedlab.engines.shards import read_shard_text_hashes, text_hashes

    stored = read_shard_text_hashes(folder)
    if stored is None:
        embedded_from = (manifest.get("input") or {}).get("sha256")
        if data.corpus_file is not None and embedded_from == file_sha256(data.corpus_file):
            return
        raise InputError(f"--corpus-vectors {folder} stores no per-text hashes (an older embedlab wrote it) and was not embedded "
                         f"from this corpus file, so its texts cannot be checked; embed the corpus again into a new folder")
    start = 0
    for block in data.document_blocks(DOC_BLOCK):
        differ = np.flatnonzero(text_hashes(block) != stored[start:start + len(block)])
        if differ.size:
            raise InputError(f"--corpus-vectors {folder}: document {data.doc_ids[start + int(differ[0])]!r} has another text than "
                             "the one its stored vector was embedded from (the first that differs); embed this corpus again")
        start += len(block)
