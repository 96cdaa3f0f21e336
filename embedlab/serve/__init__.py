"""``embedlab serve``: any method as an HTTP embedding service (docs/serve.md).

:mod:`.served` loads and fits the methods and names them, :mod:`.batching` coalesces concurrent requests
into one ``encode`` per method on a thread of its own (splitting large requests across batches),
:mod:`.service` holds what every route shares, :mod:`.app` has OpenAI's and embedlab's routes and
:mod:`.tei` text-embeddings-inference's, :mod:`.schemas` the request bodies and both error shapes,
:mod:`.guard` the limits, API key and error handlers around them, :mod:`.metrics` the Prometheus metrics
and :mod:`.server` runs it all on uvicorn. Needs the ``serve`` extra (FastAPI, uvicorn, prometheus-client).
"""
