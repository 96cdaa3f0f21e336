"""Every setting embedlab reads: what :func:`configure` set, else the environment, else the default.

This is the one module that reads the process environment (``EMBEDLAB_*`` and the few variables of other
tools embedlab honours); everything else asks a function here.

* Data root: ``configure(data_root=...)``, else ``$EMBEDLAB_DATA``, else ``../shared/data`` from the
  repository root.
* Cache root: ``configure(cache_root=...)``, else ``$EMBEDLAB_CACHE``, else ``~/.cache/embedlab``.
* Cache budget: ``configure(cache_max=...)``, else ``$EMBEDLAB_CACHE_MAX`` (``500M``, ``2G``, bytes), else
  2 GiB, over everything under the cache root (eviction: :mod:`embedlab.runtime.cache.budget`).
* Memory cache: ``configure(memory_cache_bytes=...)`` bounds the in-process token-state cache (256 MiB).
* Token-state layers kept: ``configure(cache_layers=...)``, else ``$EMBEDLAB_CACHE_LAYERS``: ``spec`` (the
  default: only the layers a method reads) or ``all`` (what a research grid asks for, see
  :mod:`embedlab.tokens.store`).
* Whether model runs store token states: on, unless a caller's block says :func:`token_states_uncached`
  (a context variable: it holds for that thread or task only) or a process turned it off for good
  (:func:`set_token_state_storing`, a Ray actor that only embeds corpora).
* Results database: ``$EMBEDLAB_RESULTS``; solver threads: ``$EMBEDLAB_SOLVER_THREADS``; tracebacks:
  ``$EMBEDLAB_DEBUG``; the Ray cluster: ``$RAY_ADDRESS``; the key of ``embedlab serve``: ``$EMBEDLAB_API_KEY``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path

from embedlab.errors import InputError
from embedlab.runtime.memo import clear

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


class _Settings:
    """What :func:`configure` set (``None``: fall back to the environment, then the default)."""

    cache_root: Path | None = None
    data_root: Path | None = None
    progress: str = "auto"
    store_token_states: bool = True
    cache_max: int | None = None
    memory_cache_bytes: int | None = None
    cache_layers: str | None = None


CACHE_MAX_VARIABLE = "EMBEDLAB_CACHE_MAX"
DEFAULT_CACHE_MAX = 2 << 30  # 2 GiB: a few grids' worth of token states, small next to any disk
DEFAULT_MEMORY_CACHE_BYTES = 256 << 20  # one layer of ≈ 5,000 WikiText-2 sentences; grids ask for more
CACHE_LAYERS_VARIABLE = "EMBEDLAB_CACHE_LAYERS"
CACHE_LAYER_CHOICES = ("spec", "all")
SOLVER_THREADS_VARIABLE = "EMBEDLAB_SOLVER_THREADS"
RESULTS_VARIABLE = "EMBEDLAB_RESULTS"
DEBUG_VARIABLE = "EMBEDLAB_DEBUG"
BOOTSTRAP_VARIABLE = "EMBEDLAB_BOOTSTRAP"
_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_SETTINGS = _Settings()
# None: the process default (_SETTINGS.store_token_states); a block of token_states_uncached sets False for
# its own thread or task only, so another thread's model runs keep caching meanwhile
_STORE_TOKEN_STATES: contextvars.ContextVar[bool | None] = contextvars.ContextVar("embedlab store token states", default=None)


def configure(
    *,
    cache_root: str | Path | None = None,
    data_root: str | Path | None = None,
    cache_max: int | str | None = None,
    memory_cache_bytes: int | str | None = None,
    cache_layers: str | None = None,
) -> None:
    """Set where caches go, where the shared data is, the disk-cache budget and the in-memory token-state
    cache's size and which token-state layers are kept (``"spec"`` or ``"all"``), for this process (clears
    every memo). ``None`` falls back to the environment, then
    the default; sizes are bytes or strings such as ``"500M"``."""
    _SETTINGS.cache_root = Path(cache_root).expanduser() if cache_root is not None else None
    _SETTINGS.data_root = Path(data_root).expanduser().resolve() if data_root is not None else None
    _SETTINGS.cache_max = parse_size(cache_max, "cache_max") if cache_max is not None else None
    _SETTINGS.memory_cache_bytes = parse_size(memory_cache_bytes, "memory_cache_bytes") if memory_cache_bytes is not None else None
    if cache_layers is not None and cache_layers not in CACHE_LAYER_CHOICES:
        raise InputError(f"cache_layers={cache_layers!r}: choose one of {', '.join(CACHE_LAYER_CHOICES)}")
    _SETTINGS.cache_layers = cache_layers
    clear()


def parse_size(value: int | str, name: str) -> int:
    """Bytes from ``1048576``, ``"500M"``, ``"2G"``, ``"1.5GiB"`` (binary units); a ValueError naming ``name``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InputError(f"{name}={value} is negative; give a size in bytes")
        return value
    text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in _SIZE_UNITS else (text, "")
    try:
        size = float(number)
    except ValueError:
        size = -1.0
    if not size >= 0 or size == float("inf"):
        raise InputError(f"{name}={value!r} is not a size: give bytes or a number with K, M, G or T (e.g. 500M, 2G)")
    return int(size * _SIZE_UNITS[unit])


def cache_budget() -> int:
    """The most bytes the whole cache folder may hold (see the module docstring)."""
    if _SETTINGS.cache_max is not None:
        return _SETTINGS.cache_max
    configured = os.environ.get(CACHE_MAX_VARIABLE, "").strip()
    return parse_size(configured, CACHE_MAX_VARIABLE) if configured else DEFAULT_CACHE_MAX


def cache_layers() -> str:
    """``"spec"``: model runs keep only the token-state layers asked for; ``"all"``: every layer (grids)."""
    if _SETTINGS.cache_layers is not None:
        return _SETTINGS.cache_layers
    configured = os.environ.get(CACHE_LAYERS_VARIABLE, "").strip() or "spec"
    if configured not in CACHE_LAYER_CHOICES:
        raise InputError(f"{CACHE_LAYERS_VARIABLE}={configured!r}: choose one of {', '.join(CACHE_LAYER_CHOICES)}")
    return configured


def memory_cache_bytes() -> int:
    """The byte bound of the in-process token-state cache."""
    return _SETTINGS.memory_cache_bytes if _SETTINGS.memory_cache_bytes is not None else DEFAULT_MEMORY_CACHE_BYTES


def stores_token_states() -> bool:
    """Whether model runs keep token states in the caches (see :func:`token_states_uncached`)."""
    scoped = _STORE_TOKEN_STATES.get()
    return _SETTINGS.store_token_states if scoped is None else scoped


@contextlib.contextmanager
def token_states_uncached() -> Iterator[None]:
    """Within this block model runs keep no token states, neither in the disk cache nor in the in-memory
    one (entries already there are still read). A corpus embedded into shards reads every text once and its shards are the result, so
    storing its token states would cost disk and time and, past the budget, evict what reruns need.
    The switch is a context variable: it holds for the calling thread (or asyncio task) only."""
    token = _STORE_TOKEN_STATES.set(False)
    try:
        yield
    finally:
        _STORE_TOKEN_STATES.reset(token)


def set_token_state_storing(enabled: bool) -> None:
    """Whether this process's model runs keep token states in the caches from now on (default yes)."""
    _SETTINGS.store_token_states = bool(enabled)


def progress_mode() -> str:
    """The progress mode :func:`embedlab.runtime.progress.set_progress` chose (``auto`` by default)."""
    return _SETTINGS.progress


def set_progress_mode(mode: str) -> None:
    _SETTINGS.progress = mode


def data_root() -> Path:
    """The folder holding the shared evaluation data (see its README)."""
    if _SETTINGS.data_root is not None:
        return _SETTINGS.data_root
    configured = os.environ.get("EMBEDLAB_DATA")
    return Path(configured).expanduser().resolve() if configured else (REPO_ROOT.parent / "shared" / "data").resolve()


def data_path(*parts: str) -> Path:
    """A file or folder inside the data root; a clear error when it is missing."""
    root = data_root()
    path = root.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"data file not found: {path} (data root searched: {root}; "
            "set EMBEDLAB_DATA to the folder that holds the shared data)"
        )
    return path


def cache_root(create: bool = True) -> Path:
    """The folder for every cache embedlab writes (token states, static tables, unpacked models);
    ``create=False`` names it without making it (for a cache that may be read-only)."""
    cache_budget()  # a bad EMBEDLAB_CACHE_MAX is reported before any work, not at the first write
    configured = _SETTINGS.cache_root or os.environ.get("EMBEDLAB_CACHE")
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "embedlab"
    if create:
        root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_path(default_file: str) -> Path:
    """The results database: ``$EMBEDLAB_RESULTS``, else ``default_file`` in the working directory."""
    configured = os.environ.get(RESULTS_VARIABLE)
    return Path(configured).expanduser() if configured else Path.cwd() / default_file


def solver_thread_count() -> int:
    """Threads for scikit-learn fits: ``$EMBEDLAB_SOLVER_THREADS``, default 1; an input error for anything
    but a positive whole number."""
    value = os.environ.get(SOLVER_THREADS_VARIABLE, "1")
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise InputError(f"{SOLVER_THREADS_VARIABLE}={value[:40]!r} must be a positive whole number (default 1)")
    return threads


def bootstrap_resamples(default: int = 1000) -> int:
    """Bootstrap resamples B of the evaluation's confidence intervals when neither ``--bootstrap`` nor
    ``evaluate(bootstrap=…)`` says: ``$EMBEDLAB_BOOTSTRAP``, default 1000 (0 turns intervals off; the
    test suite sets 0 so that only the tests about intervals pay for them)."""
    value = os.environ.get(BOOTSTRAP_VARIABLE, str(default))
    try:
        resamples = int(value)
    except ValueError:
        resamples = -1
    if resamples < 0:
        raise InputError(f"{BOOTSTRAP_VARIABLE}={value[:40]!r} must be a whole number ≥ 0 (default {default})")
    return resamples


def debug_requested() -> bool:
    """Whether ``$EMBEDLAB_DEBUG`` asks the command line to show tracebacks instead of one-line errors."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def ray_address() -> str | None:
    """The Ray cluster ``$RAY_ADDRESS`` names (``None``: start a local one)."""
    return os.environ.get("RAY_ADDRESS") or None


def serve_api_key() -> str | None:
    """The bearer key ``embedlab serve`` asks for: ``$EMBEDLAB_API_KEY`` as set (``None``: unset, no key; an empty
    value is returned as it is, for the command to refuse; docs/serve.md)."""
    return os.environ.get("EMBEDLAB_API_KEY")


def forbid_downloads() -> None:
    """Tell the Hugging Face libraries not to reach the hub, unless the user set ``HF_HUB_OFFLINE``
    themselves: embedlab never downloads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
