"""The retrieval task: a hand-computed case, its run equal to trec_eval's reading of it, reranking, storage."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import pytrec_eval
from fakes import FakeMethod, isolated_eval_cache  # noqa: F401 (autouse fixture)

from embedlab.errors import InputError
from embedlab.evaluation.base import NotApplicableError
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.results.database import ResultsDB
from tolerance import UNIT_ATOL

ROOT_HALF = np.float32(1 / np.sqrt(2))
DOCUMENTS = {"a": ("alpha", [1, 0]), "b": ("beta", [1, 0]), "c": ("gamma", [0, 1]), "d": ("delta", [ROOT_HALF, ROOT_HALF])}
QUERIES = {"q1": ("first", [1, 0]), "d": ("fourth", [1, 1]), "q3": ("third", [0, 1]), "q4": ("unjudged", [1, 0])}
QRELS = [("q1", "a", 2), ("q1", "c", 1), ("d", "a", 1), ("d", "b", 3), ("q3", "c", 0)]


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "hand"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, (t, _) in DOCUMENTS.items()))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, (t, _) in QUERIES.items()))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS))
    return root


def fake() -> FakeMethod:
    return FakeMethod({text: np.array(vector, np.float32) for text, vector in [*DOCUMENTS.values(), *QUERIES.values()]}, dim=2)


def metrics(records, subset="all"):
    return {r.metric: r.value for r in records if r.subset == subset}


def test_hand_computed_case_and_trec_eval_on_the_run(folder, tmp_path):
    """q1 = (1, 0): a and b tie at 1.0 and b (the larger id) comes first, so the cut-off at 1 keeps b (not
    relevant); q 'd' = (1, 1)/√2 never retrieves document 'd' (its own id) and ties a, b, c: order c, b, a;
    q3 is judged only 0: kept, scoring 0; q4 has no judgement: skipped and counted."""
    run_file = tmp_path / "run.trec"
    (task,) = parse_tasks(f"retrieval:@{folder}", k="1,3", run_out=str(run_file))
    records = task.run(fake())
    values = metrics(records)
    log3 = np.log2(3)
    ndcg_q1, ndcg_d = (2 / log3) / (2 + 1 / log3), (3 / log3 + 1 / 2) / (3 + 1 / log3)
    assert (values["queries"], values["skipped_queries"], values["documents"]) == (3, 1, 4)
    assert values["ndcg@3"] == pytest.approx((ndcg_q1 + ndcg_d + 0) / 3)
    assert values["map@3"] == pytest.approx(((1 / 2) / 2 + (1 / 2 + 2 / 3) / 2 + 0) / 3)
    assert values["mrr@3"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
    assert values["recall@3"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert values["precision@3"] == pytest.approx((1 / 3 + 2 / 3 + 0) / 3)
    assert all(values[f"{m}@1"] == 0 for m in ("ndcg", "map", "mrr", "recall", "precision"))
    lines = [line.split() for line in run_file.read_text().splitlines()]
    assert [line[2] for line in lines if line[0] == "d"] == ["c", "b", "a"]
    run = {}
    for query, _, doc, _, score, _ in lines:
        run.setdefault(query, {})[doc] = float(score)
    qrels = {}
    for query, doc, grade in QRELS:
        qrels.setdefault(query, {})[doc] = grade
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,3", "map_cut.1,3", "recall.1,3", "P.1,3"}).evaluate(run)
    for ours, theirs in (("ndcg@3", "ndcg_cut_3"), ("map@3", "map_cut_3"), ("recall@3", "recall_3"), ("precision@3", "P_3"),
                         ("ndcg@1", "ndcg_cut_1")):
        assert values[ours] == pytest.approx(np.mean([reference[q][theirs] for q in reference]), abs=1e-6)
    per_query = next(r for r in records if r.metric == "ndcg@3").units
    assert (per_query.resampled, per_query.statistic, len(per_query)) == ("queries", "mean", 3)


def test_rerank_rows_have_their_own_subset_and_never_replace_the_first_stage(folder, tmp_path):
    db = ResultsDB(tmp_path / "results.sqlite")
    vectors = {text: np.array(vector, np.float32) for text, vector in [*DOCUMENTS.values(), *QUERIES.values()]}
    reranker = FakeMethod(vectors | {"beta": np.array([0, 1], np.float32)}, dim=2, spec="swap", pairwise=True)
    first = evaluate([fake()], parse_tasks(f"retrieval:@{folder}", k="3"), db=db)
    again = evaluate([fake()], parse_tasks(f"retrieval:@{folder}", k="3", rerank=reranker, rerank_depth=2), db=db)
    assert not again.reused  # the rerank rows were missing: run, first stage included
    subset = "rerank:swap@2"
    stored = db.records("fake", "retrieval")
    assert metrics(stored) == metrics(first.records)
    assert metrics(stored, subset)["rerank_seconds_per_query"] >= 0
    # q1's top 2 (b, a) re-scored: a first now, a relevant document at rank 1
    assert metrics(stored, subset)["mrr@3"] == pytest.approx((1 + 1 / 2 + 0) / 3)
    assert metrics(stored)["mrr@3"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
    third = evaluate([fake()], parse_tasks(f"retrieval:@{folder}", k="3", rerank=reranker, rerank_depth=2), db=db)
    assert third.reused


def test_pairwise_methods_are_refused_where_they_cannot_serve(folder):
    with pytest.raises(InputError, match="--rerank needs a pairwise method"):
        parse_tasks(f"retrieval:@{folder}", rerank=FakeMethod(spec="vectors"))
    (task,) = parse_tasks(f"retrieval:@{folder}")
    with pytest.raises(NotApplicableError, match="rerank with it instead"):
        task.run(FakeMethod(pairwise=True))


@pytest.mark.crosspath
def test_a_corpus_embedded_by_embed_out_is_reused(folder, tmp_path):
    """`embed minilm --input corpus.jsonl --out FOLDER` reads BEIR's records (id `_id`, text title + text); the
    retrieval run over that folder equals the run that encodes the corpus itself."""
    import embedlab
    from embedlab.engines.runner import embed_corpus
    from embedlab.engines.shards import read_shards

    method = embedlab.load("minilm")
    embed_corpus("minilm", folder / "corpus.jsonl", tmp_path / "vectors")
    ids, vectors = read_shards(tmp_path / "vectors")
    assert ids == ["a", "b", "c", "d"]
    np.testing.assert_allclose(vectors, method.encode(["alpha", "beta", "gamma", "delta"]), atol=UNIT_ATOL)  # shards vs one call
    (own,) = parse_tasks(f"retrieval:@{folder}", k="3")
    (reused,) = parse_tasks(f"retrieval:@{folder}", k="3", corpus_vectors=str(tmp_path / "vectors"))
    assert metrics(reused.run(method)) == pytest.approx(metrics(own.run(method)))
    with pytest.raises(InputError, match="holds 'minilm' vectors"):
        reused.run(embedlab.load("minilm:layers=1"))


def test_hnsw_search_finds_the_exact_neighbours_of_a_small_corpus(tmp_path):
    """faiss's graph index is exact on a corpus this small; a query's own document is still never a result."""
    root = tmp_path / "small"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"doc {i}"}) + "\n" for i in range(30)))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"query {i}"}) + "\n" for i in range(5)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"d{i}\td{i + 7}\t1\n" for i in range(5)))
    exact, approximate = (parse_tasks(f"retrieval:@{root}", k="1,5,10", search=search, run_out=str(tmp_path / f"{search}.run"))[0]
                          for search in ("exact", "hnsw"))
    assert approximate.settings() == {"k": "1,5,10", "search": "hnsw"}
    method = FakeMethod(dim=8)
    assert metrics(approximate.run(method)) == pytest.approx(metrics(exact.run(method)))
    runs = [(tmp_path / f"{search}.run").read_text().split("\n") for search in ("exact", "hnsw")]
    assert [line.split()[:3] for line in runs[0] if line] == [line.split()[:3] for line in runs[1] if line]
    assert all(line.split()[0] != line.split()[2] for line in runs[1] if line)
    with pytest.raises(InputError, match="unknown search"):
        parse_tasks(f"retrieval:@{root}", search="ivf")


class SignBits(FakeMethod):
    """A binary method as embedlab's precision=ubinary gives it to the harness: each vector's signs as ±1,
    unless the call asks for float32."""

    output_precision = "ubinary"

    def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False, precision=None):
        vectors = super().encode(texts)
        return vectors if precision == "float32" else np.where(vectors > 0, 1.0, -1.0).astype(np.float32)


def test_binary_vectors_are_searched_by_hamming_distance_and_rescored(tmp_path):
    from embedlab.evaluation.ranking import trec_order

    rng = np.random.default_rng(5)
    root = tmp_path / "bits"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i:02d}", "text": f"doc {i}"}) + "\n" for i in range(40)))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(6)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{3 * i:02d}\t1\n" for i in range(6)))
    method = SignBits({f"{kind} {i}": rng.standard_normal(16) for kind, count in (("doc", 40), ("query", 6)) for i in range(count)}, dim=16)
    ids = [f"d{i:02d}" for i in range(40)]
    docs, queries = (np.stack([method.vector(f"{kind} {i}") for i in range(count)]) for kind, count in (("doc", 40), ("query", 6)))
    for multiplier in (0, 2):
        (task,) = parse_tasks(f"retrieval:@{root}", k="5", rescore=multiplier, run_out=str(tmp_path / f"{multiplier}.run"))
        task.run(method)
        lines = [line.split() for line in (tmp_path / f"{multiplier}.run").read_text().splitlines()]
        for number in range(6):
            signs = np.where(docs > 0, 1.0, -1.0)
            if multiplier:  # Hamming's first 10, re-ranked by the float query against the ±1 documents
                hamming = trec_order(ids, signs @ np.where(queries[number] > 0, 1.0, -1.0))[:10]
                rescored = signs[hamming] @ (queries[number] / np.linalg.norm(queries[number]))
                expected = [ids[hamming[i]] for i in trec_order([ids[j] for j in hamming], rescored)[:5]]
            else:
                expected = [ids[i] for i in trec_order(ids, signs @ np.where(queries[number] > 0, 1.0, -1.0))[:5]]
            assert [line[2] for line in lines if line[0] == f"q{number}"] == expected
    assert task.settings() == {"k": "5", "rescore": 2}


def test_stored_corpus_vectors_of_other_texts_under_the_same_ids_are_refused(folder, tmp_path):
    """A folder embedded from a corpus with the same ids but another text for 'c' is refused, naming 'c'
    (not reused: it would give another document's similarity); a folder of this very corpus still serves,
    and a file or an empty folder is named as what it is."""
    import embedlab
    from embedlab.engines.runner import embed_corpus

    other = tmp_path / "other.jsonl"
    texts = {doc_id: text for doc_id, (text, _) in DOCUMENTS.items()} | {"c": "another gamma"}
    other.write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in texts.items()))
    embed_corpus("random:minilm", other, tmp_path / "stale")
    embed_corpus("random:minilm", folder / "corpus.jsonl", tmp_path / "fresh")
    method = embedlab.load("random:minilm")
    (stale,) = parse_tasks(f"retrieval:@{folder}", k="3", corpus_vectors=str(tmp_path / "stale"))
    with pytest.raises(InputError, match=r"stale: document 'c' has another text"):
        stale.run(method)
    (fresh,) = parse_tasks(f"retrieval:@{folder}", k="3", corpus_vectors=str(tmp_path / "fresh"))
    (own,) = parse_tasks(f"retrieval:@{folder}", k="3")
    assert metrics(fresh.run(method)) == pytest.approx(metrics(own.run(method)))
    (tmp_path / "empty").mkdir()
    for given, message in ((other, "is not a folder"), (tmp_path / "empty", "holds no manifest.json")):
        (task,) = parse_tasks(f"retrieval:@{folder}", k="3", corpus_vectors=str(given))
        with pytest.raises(InputError, match=message):
            task.run(method)


def test_a_folder_without_text_hashes_passes_only_for_its_own_corpus_file(folder, tmp_path):
    """Folders written before the hashes: the manifest's input SHA-256 must be this corpus file's."""
    import pyarrow.parquet as pq

    import embedlab
    from embedlab.engines.runner import embed_corpus

    copy = tmp_path / "copy.jsonl"
    copy.write_text((folder / "corpus.jsonl").read_text() + "\n")  # same records, another file
    for name, source in (("own", folder / "corpus.jsonl"), ("copied", copy)):
        embed_corpus("random:minilm", source, tmp_path / name)
        manifest_path = tmp_path / name / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        for entry in manifest["shards"]:  # as an older embedlab wrote it: no text_hash column
            shard = tmp_path / name / entry["file"]
            pq.write_table(pq.read_table(shard).drop_columns(["text_hash"]), shard)
            entry["sha256"] = hashlib.sha256(shard.read_bytes()).hexdigest()
        manifest_path.write_text(json.dumps(manifest))
    method = embedlab.load("random:minilm")
    (own,) = parse_tasks(f"retrieval:@{folder}", k="3", corpus_vectors=str(tmp_path / "own"))
    assert metrics(own.run(method))["documents"] == 4
    (copied,) = parse_tasks(f"retrieval:@{folder}", k="3", corpus_vectors=str(tmp_path / "copied"))
    with pytest.raises(InputError, match="stores no per-text hashes"):
        copied.run(method)


def test_run_out_over_an_input_is_refused_before_any_work(folder, tmp_path):
    """--run-out goes through the one output writer's checks when the task is built: the queries file is
    never overwritten, a folder is named as one."""
    before = (folder / "queries.jsonl").read_bytes()
    with pytest.raises(InputError, match=r"--run-out .*queries\.jsonl is the input file"):
        parse_tasks(f"retrieval:@{folder}", run_out=str(folder / "queries.jsonl"))
    with pytest.raises(InputError, match=r"--run-out .*qrels is a folder"):
        parse_tasks(f"retrieval:@{folder}", run_out=str(folder / "qrels"))
    assert (folder / "queries.jsonl").read_bytes() == before


def test_options_that_would_do_nothing_are_refused(folder):
    with pytest.raises(InputError, match="--rerank-depth is how many documents --rerank re-scores"):
        parse_tasks(f"retrieval:@{folder}", rerank_depth=5)
    (task,) = parse_tasks(f"retrieval:@{folder}", rescore=4)
    with pytest.raises(InputError, match="--rescore 4 re-ranks the Hamming candidates of binary vectors, but 'fake' gives float32"):
        task.run(fake())
