"""``embedlab serve``: any method as an HTTP embedding service (docs/serve.md).

:mod:`.served` loads and fits the methods and names them, :mod:`.batching` coalesces concurrent requests
into one ``encode`` per method on a thread of its own, :mod:`.app` has the routes, :mod:`.guard` the
limits, API key and error shape around them, :mod:`.metrics` the Prometheus metrics and :mod:`.server`
runs it all on uvicorn. Needs the ``serve`` extra (FastAPI, uvicorn, prometheus-client).
"""
