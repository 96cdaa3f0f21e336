"""``embedlab cache info`` (where the cache is, its budget, what each kind of entry takes, what ``dtype=auto``
measured on this machine) and
``embedlab cache clear [--kind K]`` (delete recomputable entries).

Everything under the cache folder counts towards the budget (``EMBEDLAB_CACHE_MAX``); only recomputable
kinds (token states, evaluation encodings, neural embeddings, reference statistics …) are evicted or
cleared. Trained weights, checkpoints and unpacked models stay until deleted by hand.
"""

from __future__ import annotations

import argparse

from embedlab.errors import InputError, UnknownNameError
from embedlab.runtime.cache.budget import cache_kinds, clear_cache
from embedlab.runtime.settings import CACHE_LAYERS_VARIABLE, CACHE_MAX_VARIABLE, cache_budget, cache_layers, cache_root


def _size(nbytes: int) -> str:
    """Bytes in binary units, as EMBEDLAB_CACHE_MAX takes them."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def _cmd_info(args: argparse.Namespace) -> int:
    from embedlab.models.compute_choice import stored_choices
    from embedlab.tokens.packs import indexed_entries

    root = cache_root(create=False)
    kinds = cache_kinds()
    total = sum(kind.bytes for kind in kinds)
    budget = cache_budget()
    print(f"location: {root}{'' if root.is_dir() else ' (not created yet)'}")
    print(f"budget:   {_size(budget)} ({CACHE_MAX_VARIABLE}; least recently used entries are evicted beyond it)")
    print(f"used:     {_size(total)} ({100 * total / budget:.0f}% of the budget)" if budget else f"used:     {_size(total)}")
    print(f"layers:   {cache_layers()} ({CACHE_LAYERS_VARIABLE}: 'spec' keeps the layers a method reads, 'all' every layer)")
    for choice in stored_choices():
        timings = ", ".join(f"{compute} {seconds * 1000:.1f} ms" for compute, seconds in choice.seconds.items() if seconds == seconds)
        print(f"dtype=auto: {choice.compute} for width {choice.hidden} on {choice.machine} ({choice.measured_at}; "
              f"{timings or 'not timed'}; {choice.reason})")
    if not kinds:
        return 0
    print(f"\n{'kind':24s} {'size':>11s} {'files':>7s} {'entries':>8s}  evictable")
    for kind in kinds:
        entries = indexed_entries(root / kind.name) if kind.name == "token_states" else kind.entries
        print(f"{kind.name:24s} {_size(kind.bytes):>11s} {kind.entries:7d} {entries:8d}  {'yes' if kind.recomputable else 'no (kept)'}")
    return 0


def _cmd_clear(args: argparse.Namespace) -> int:
    kinds = {kind.name: kind for kind in cache_kinds()}
    if args.kind is not None and args.kind not in kinds:
        raise UnknownNameError(f"no cache kind {args.kind!r} in {cache_root(create=False)}; "
                          f"kinds there: {', '.join(sorted(kinds)) or 'none'}")
    if args.kind is not None and not kinds[args.kind].recomputable:
        raise InputError(f"{args.kind} holds files that cannot be recomputed (trained weights, checkpoints, models); "
                         f"delete {cache_root(create=False) / args.kind} by hand if you mean it")
    freed = clear_cache(args.kind)
    kept = [name for name, kind in kinds.items() if not kind.recomputable and args.kind is None]
    print(f"freed {_size(freed)} from {cache_root(create=False)}{f' ({args.kind})' if args.kind else ''}"
          + (f"; kept (not recomputable): {', '.join(sorted(kept))}" if kept else ""))
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``cache info`` and ``cache clear``."""
    cache = subparsers.add_parser("cache", help="show or clear the on-disk cache (location, budget, size per kind)")
    actions = cache.add_subparsers(dest="action", required=True)
    info = actions.add_parser("info", help="location, budget, and size, files and entries per kind")
    info.set_defaults(handler=_cmd_info)
    clear = actions.add_parser("clear", help="delete recomputable entries (all kinds, or one with --kind)")
    clear.add_argument("--kind", help="only this kind (a folder name that 'cache info' lists, e.g. token_states, eval)")
    clear.set_defaults(handler=_cmd_clear)
