"""The task options ``eval``, ``compare`` and ``choose`` share (one definition each): what they mean to the tasks, how
the parsed command line becomes tasks, and the checks that tie options to the tasks selected.

The options that change a task's numbers name a *settings group* of the results database (docs/evaluation.md,
"Append-only, settings in the identity"): ``compare`` reads, of every stored group, the one its own options name
(:func:`embedlab.evaluation.settings_groups.named_settings`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from embedlab.cli.arguments import non_negative_int, positive_int, seed_int
from embedlab.errors import InputError


def add_task_options(parser: argparse.ArgumentParser) -> None:
    """Every task option of ``eval`` (besides ``--seed``, which each command states with its own meaning)."""
    parser.add_argument("--pair-features", choices=("senteval", "full"), default="senteval",
                        help="MRPC/SICK-E classifier features: senteval [|u-v|, u*v] or full [u, v, |u-v|, u*v]")
    parser.add_argument("--groups-per-line", action="store_true",
                        help="user grouped files (triplets:@FILE) hold one group per line")
    parser.add_argument("--product", choices=("cosine", "dot"), default="cosine",
                        help="triplets, pairs, correlations: the embedding product; dot keeps the embeddings as "
                             "encoded (neural-embeddings paper Appendix F; subsets named SUBSET,product=dot)")
    group = parser.add_argument_group("retrieval (retrieval:qqp, retrieval:@BEIR_FOLDER; docs/evaluation.md)")
    group.add_argument("--split", default="test", help="qrels split of a BEIR folder: qrels/SPLIT.tsv (default test)")
    group.add_argument("--k", default="1,3,5,10,100", help="cut-offs of nDCG, MAP, MRR, recall, precision (default 1,3,5,10,100)")
    group.add_argument("--run-out", metavar="FILE", default=None, help="write the first stage's run in TREC run format (qid Q0 docid rank score tag)")
    group.add_argument("--rerank", metavar="SPEC", default=None,
                       help="re-score the first stage's top documents with a pairwise method (match:minilm, match:minilm,mode=bertscore)")
    group.add_argument("--rerank-depth", type=positive_int, default=None, help="how many first-stage documents --rerank re-scores (default 100)")
    group.add_argument("--search", choices=("exact", "hnsw"), default="exact",
                       help="first stage: exact (blocked, trec_eval's tie order) or hnsw (faiss's approximate index; pip install faiss-cpu)")
    group.add_argument("--rescore", type=non_negative_int, default=0, metavar="M",
                       help="binary vectors (precision=ubinary|binary): re-rank the first M×k Hamming candidates with the float "
                            "query against the documents' bits (0: Hamming order alone)")
    group.add_argument("--corpus-vectors", metavar="FOLDER", default=None,
                       help="the corpus already embedded by `embed SPEC --input FOLDER/corpus.jsonl --out FOLDER` with the same spec")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """What the commands that evaluate and then judge (``compare``, ``choose``) take besides their own options: the
    task selection, the results database, ``--force`` and ``--seed``."""
    parser.add_argument("--tasks", default="quick", help="comma-separated task selection, as eval takes it (default: quick)")
    parser.add_argument("--db", default=None, help="results database file (default ./embedlab_results.sqlite, or $EMBEDLAB_RESULTS)")
    parser.add_argument("--no-db", action="store_true", help="do not read or write the results database")
    parser.add_argument("--force", action="store_true", help="recompute results already in the database")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the tasks' random choices and of the resamples")


def tasks_from_options(args: argparse.Namespace, load_method: Callable[[str], object]) -> list:
    """The tasks of ``--tasks`` with every task option of the command line (``load_method`` loads ``--rerank``'s
    spec), checked against the tasks selected and the number of methods (``args.specs``)."""
    from embedlab.evaluation.harness import parse_tasks

    rerank = load_method(args.rerank) if args.rerank else None
    tasks = parse_tasks(args.tasks, seed=args.seed, pair_features=args.pair_features,
                        layout="line" if args.groups_per_line else "column", product=args.product,
                        split=args.split, k=args.k, run_out=args.run_out, rerank=rerank, rerank_depth=args.rerank_depth,
                        corpus_vectors=args.corpus_vectors, search=args.search, rescore=args.rescore)
    _check_retrieval_flags(args, tasks, args.specs)
    return tasks


def _check_retrieval_flags(args: argparse.Namespace, tasks: list, specs: Sequence[str]) -> None:
    retrieval = [task for task in tasks if task.name == "retrieval"]
    given = [flag for flag, value in (("--run-out", args.run_out), ("--rerank", args.rerank), ("--corpus-vectors", args.corpus_vectors))
             if value]
    if given and not retrieval:
        raise InputError(f"{given[0]} is an option of retrieval tasks; --tasks selects none")
    if (args.run_out or args.corpus_vectors) and (len(retrieval) > 1 or len(specs) > 1):
        raise InputError("--run-out and --corpus-vectors belong to one run: give one method and one retrieval task")
