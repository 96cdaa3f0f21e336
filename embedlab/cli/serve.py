"""``embedlab serve SPEC [SPEC ...]``: methods as an HTTP embedding service (OpenAI's ``/v1/embeddings``,
``/similarity``, ``/rerank``, text-embeddings-inference's ``/embed`` and ``/info``, ``/metrics``), batched
across clients; docs/serve.md.

Everything is loaded and fitted before the socket opens; then the one line ``listening on
http://HOST:PORT`` goes to stdout, and the server runs until SIGTERM or Ctrl-C, finishing the requests in
flight. The web stack is imported only when the command runs (``pip install 'embedlab[serve]'``).
"""

from __future__ import annotations

import argparse
import os
import warnings

from embedlab.cli.arguments import non_negative_float, non_negative_int, positive_int
from embedlab.errors import InputError
from embedlab.runtime.extras import MissingExtraError
from embedlab.runtime.memory import limit_malloc_arenas
from embedlab.runtime.progress import status
from embedlab.runtime.settings import serve_api_key

def _port(text: str) -> int:
    port = non_negative_int(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535; 0 picks a free one)")
    return port


MAX_WAIT_MS = 1000.0  # a batching window past a second only delays a lone request


def _max_wait_ms(text: str) -> float:
    wait = non_negative_float(text)
    if wait > MAX_WAIT_MS:
        raise argparse.ArgumentTypeError(f"{text!r}: at most {MAX_WAIT_MS:.0f} ms (a lone request waits this long for others)")
    return wait


def _api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key`` or ``$EMBEDLAB_API_KEY``, checked: an empty or unsendable key is refused
    rather than serving an open server (or one no client can reach)."""
    from embedlab.serve.guard import check_api_key

    if args.api_key is not None:
        return check_api_key(args.api_key, "--api-key")
    from_environment = serve_api_key()
    return None if from_environment is None else check_api_key(from_environment, "EMBEDLAB_API_KEY")


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise MissingExtraError("serve", f"serving over HTTP ({error.name})") from error
    from embedlab.serve.app import create_app
    from embedlab.serve.guard import is_loopback
    from embedlab.serve.served import load_served, parse_aliases
    from embedlab.serve.server import bind, listen
    from embedlab.serve.service import ServeOptions

    if args.fit_on and args.fitted:
        raise InputError("give --fit-on FILE or --fitted FOLDER, not both")
    options = ServeOptions(
        max_inputs=args.max_inputs, max_input_chars=args.max_input_chars, max_body_bytes=args.max_body_bytes,
        max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
        batch_size=args.batch_size, api_key=_api_key(args), default_model=args.default,
    )
    if options.api_key is None and not is_loopback(args.host):
        warnings.warn(f"--host {args.host} without --api-key (or EMBEDLAB_API_KEY): anyone who reaches this port can use "
                      "the server", stacklevel=1)
    limit_malloc_arenas(max(2, len(os.sched_getaffinity(0))))  # before any thread starts: see the function
    sock = bind(args.host, args.port)  # a port in use is refused before the methods load
    try:
        served = load_served(args.spec, parse_aliases(args.name), fit_on=args.fit_on, fitted=args.fitted, batch_size=args.batch_size)
        listener = listen(create_app(served, options), sock=sock)
    except BaseException:
        sock.close()
        raise
    status(f"serving {', '.join(sorted({entry.spec for entry in served.values()}))}")
    print(f"listening on {listener.url}", flush=True)
    listener.run()
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``serve``."""
    serve = subparsers.add_parser("serve", help="serve methods over HTTP: OpenAI /v1/embeddings, /similarity, /rerank, TEI /embed (docs/serve.md)")
    serve.add_argument("spec", nargs="*", help="method specs to serve; a request's model names one as typed, canonical, or by --name")
    serve.add_argument("--name", action="append", default=[], metavar="ALIAS=SPEC",
                       help="another name for a spec (served too if not listed), e.g. --name text-embedding-3-small=minilm")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--api-key", default=None,
                       help="require Authorization: Bearer KEY on every route but /health (default $EMBEDLAB_API_KEY; none: open)")
    serve.add_argument("--default", default=None, metavar="NAME",
                       help="the method that answers requests naming no model (TEI's /embed, /rerank, /similarity, /info); "
                            "default: the first spec")
    fitting = serve.add_argument_group("target-fitted specs (weights=idf-target, post= without @ref)")
    fitting.add_argument("--fit-on", default=None, metavar="FILE", help="fit them at start on these texts (any `embed --input` format)")
    fitting.add_argument("--fitted", action="append", default=[], metavar="FOLDER",
                         help="restore the statistics an `embed SPEC --out FOLDER` run fitted (repeatable, one per spec)")
    batching = serve.add_argument_group("batching")
    batching.add_argument("--max-batch-tokens", type=positive_int, default=16_384,
                          help="tokens per coalesced encode call (default 16384); a larger request is split across calls")
    batching.add_argument("--max-wait-ms", type=_max_wait_ms, default=0.0,
                          help="how long an idle model waits for more requests to join a batch (default 0: a lone request starts at once, "
                               "and those arriving while a batch runs join the next; at most 1000)")
    batching.add_argument("--max-queue", type=positive_int, default=1024, help="waiting requests per model before 503 (default 1024)")
    batching.add_argument("--batch-size", type=positive_int, default=32, help="encode's batch_size (default 32)")
    limits = serve.add_argument_group("limits (answered 400/413 in OpenAI's error shape)")
    limits.add_argument("--max-inputs", type=positive_int, default=2048, help="texts per request (default 2048)")
    limits.add_argument("--max-input-chars", type=positive_int, default=100_000, help="characters per text (default 100000)")
    limits.add_argument("--max-body-bytes", type=positive_int, default=16 * 1024 * 1024, help="request body size (default 16 MiB)")
    serve.set_defaults(handler=_cmd_serve)
