"""embedlab: text embeddings from pretrained transformers without fine-tuning, evaluated on one harness.

>>> import embedlab
>>> method = embedlab.load("minilm")                 # any method spec
>>> vectors = method.encode(["a text", "another"])   # numpy.float32, shape (2, 384)
>>> P, R, F = embedlab.bertscore(["a candidate"], ["its reference"])  # as the bert-score package gives them
>>> run = embedlab.evaluate(["minilm"], "retrieval:@scifact", k="10")   # as `embedlab eval`, same database
>>> run.records, run.reused, run.skipped
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``embedlab.__version__``, read from :mod:`embedlab.version` on first use (PEP 562)."""
    if name == "__version__":
        from embedlab.version import __version__

        return __version__
    raise AttributeError(f"module 'embedlab' has no attribute {name!r}")


def load(spec: str):
    """The embedding method named by a method spec (see ``embedlab methods``)."""
    from embedlab.registry import load as load_method

    return load_method(spec)


def evaluate(methods, tasks, *, db=True, force: bool = False, seed: int = 0, bootstrap: int | None = None,
             intersections: bool = False, **options):
    """Evaluate ``methods`` on ``tasks`` as ``embedlab eval`` does, and return the
    :class:`~embedlab.evaluation.harness.EvaluationRun` (``records``, ``reused``, ``skipped``).

    ``methods``: method specs (``"minilm"``, ``"minilm:precision=ubinary"``) or method objects (an embedlab method,
    a ``SentenceTransformer``, anything with ``encode(texts)``). ``tasks``: a task selection as ``--tasks``
    takes it (``"sts,retrieval:@path/to/beir"``, ``"quick"``) or a list of items or of task objects.
    ``options``: the command's task options under their Python names (``k="1,10"``, ``search="hnsw"``,
    ``rescore=4``, ``rerank="match:minilm"`` or a loaded pairwise method, ``rerank_depth``, ``split``, ``product``,
    ``pair_features``, ``layout``, ``run_out``, ``corpus_vectors``); ``seed``, ``bootstrap``, ``force`` and
    ``intersections`` as ``--seed``, ``--bootstrap``, ``--force``, ``--intersection``. ``db``: True (the default)
    for the command line's results database (``./embedlab_results.sqlite`` or ``$EMBEDLAB_RESULTS``), a path or a
    ``ResultsDB``, or None to store and reuse nothing.
    """
    from embedlab.errors import InputError
    from embedlab.evaluation.base import Task
    from embedlab.evaluation.harness import evaluate as run_tasks
    from embedlab.evaluation.harness import TASKS, parse_tasks
    from embedlab.results.database import ResultsDB

    known = {option for task in TASKS for option in task.options}
    unknown = sorted(set(options) - known)
    if unknown:  # a misspelt option would otherwise be ignored and its default used: a silent wrong number
        raise InputError(f"unknown task option {unknown[0]!r}; the tasks take {', '.join(sorted(known))}")
    if isinstance(methods, str) or not isinstance(methods, (list, tuple)) and hasattr(methods, "encode"):
        methods = [methods]
    loaded = [load(method) if isinstance(method, str) else method for method in methods]
    if isinstance(options.get("rerank"), str):
        options["rerank"] = load(options["rerank"])
    task_list = [tasks] if isinstance(tasks, Task) else list(tasks) if not isinstance(tasks, str) else None
    if task_list is not None and all(isinstance(task, Task) for task in task_list):
        if options:
            raise InputError(f"task options ({', '.join(sorted(options))}) go with a task selection, not with task objects "
                             "(give them to the task classes)")
    else:
        task_list = parse_tasks(tasks, seed=seed, **options)
    database = ResultsDB() if db is True else db if db is None or isinstance(db, ResultsDB) else ResultsDB(db)
    return run_tasks(loaded, task_list, db=database, force=force, seed=seed, bootstrap=bootstrap, intersections=intersections)


def bertscore(cands, refs, model="minilm", layer=None, idf=False, rescale=False, batch_size=64, **options):
    """BERTScore (P, R, F1) of each candidate against its reference, equal to the ``bert-score`` package's
    ``score``; float32 arrays. See :func:`embedlab.matching.bertscore.bertscore` for every option."""
    from embedlab.matching.bertscore import bertscore as score

    return score(cands, refs, model=model, layer=layer, idf=idf, rescale=rescale, batch_size=batch_size, **options)


__all__ = ["__version__", "bertscore", "evaluate", "load"]
