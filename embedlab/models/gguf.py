"""GGUF files: found, checked (header and tensor table only) and dequantised once into a cached float32
model folder named by the file's content hash."""

from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from embedlab.models.checks import ModelFileError, check_loaded_model, quiet_load_report
from embedlab.models.fingerprints import content_sha256
from embedlab.models.named import ModelNotFoundError
from embedlab.runtime.cache.atomic import remove_orphan_staging, staging_path, warn_unwritable
from embedlab.runtime.cache.budget import mark_recomputable, record_cache_write
from embedlab.runtime.cache.hashing import file_sha256
from embedlab.runtime.extras import MissingExtraError
from embedlab.runtime.memo import cached, memo
from embedlab.runtime.progress import library_bars
from embedlab.runtime.settings import cache_root


GGUF_FORMAT = "2"  # bump when the converted folder's layout changes: older conversions are then redone
_TEMPORARY_CONVERSIONS = memo("models.gguf conversions outside the cache")
# The header check's parsed reader, kept for the conversion that usually follows it (the check runs only for
# a file not converted yet): parsing SmolLM2's header costs ≈ 2 CPU s. One file's reader at most.
_READER_FOR_CONVERSION = memo("models.gguf reader awaiting conversion", maxsize=1)


def gguf_in(path: Path) -> Path | None:
    """``path`` itself when it is a GGUF file; the one GGUF file of a folder without config.json; else None."""
    if path.is_file():
        return path if path.suffix.lower() == ".gguf" else None
    if path.is_dir() and not (path / "config.json").exists():
        found = sorted(path.glob("*.gguf"))
        if len(found) > 1:
            raise ModelNotFoundError(f"folder {path} holds {len(found)} GGUF files ({', '.join(f.name for f in found)}); name one of them")
        return found[0] if found else None
    return None


def converted_gguf_folder(gguf: Path) -> Path:
    """Where the dequantised float32 model folder of ``gguf`` lives in the cache (it may not exist yet)."""
    return cache_root(create=False) / "models" / f"gguf-{content_sha256(gguf)[:24]}-v{GGUF_FORMAT}"


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF's header says before any weight is read: enough to check a spec against it."""

    architecture: str
    has_tokenizer: bool  # tokenizer.ggml.tokens is present (transformers builds the tokenizer from it)
    block_count: int | None
    context_length: int | None
    embedding_length: int | None
    own_output_head: bool  # an untied ``output.weight`` tensor: the model's own LM head


def check_gguf(gguf: Path, name: str) -> str:
    """The GGUF's architecture, after checking the file reads and ``transformers`` knows the architecture.

    Reads the header and tensor table only (no weights are dequantised), once per file version in a process
    (the check at ``embedlab.load`` and the conversion's own). A damaged or truncated file, an architecture
    ``transformers`` cannot convert and a file without tokenizer metadata each get their own error naming it.
    """
    return gguf_header(gguf, name).architecture


def gguf_header(gguf: Path, name: str) -> GGUFHeader:
    """:func:`check_gguf`'s checks, and the header they read."""
    try:
        import gguf as gguf_library  # noqa: F401  (the extra's presence, before anything is read)
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError as error:
        raise MissingExtraError("llm", f"model {name!r} (GGUF file {gguf.name})") from error
    status = gguf.stat()
    try:
        header = _header(str(gguf.resolve()), status.st_size, status.st_mtime_ns)
    except (ValueError, KeyError, IndexError, OSError) as error:
        raise ModelNotFoundError(
            f"model {name!r}: GGUF file {gguf} is damaged or truncated ({error}); "
            "re-install the package or copy the file again") from None
    architecture = header.architecture
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES and architecture.replace("-", "_") not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ModelNotFoundError(
            f"model {name!r}: GGUF file {gguf} holds a {architecture!r} model, which transformers cannot read from GGUF "
            f"(it reads: {', '.join(sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ('general', 'tokenizer')))}); "
            "convert it to a Hugging Face folder (config.json + safetensors) and give that folder")
    if not header.has_tokenizer:
        raise ModelFileError(f"model {name!r}: GGUF file {gguf} has no tokenizer metadata (tokenizer.ggml.tokens); "
                             "embedlab needs the tokenizer inside the GGUF file")
    return header


@cached("models.gguf_header")
def _header(path: str, size: int, mtime_ns: int) -> GGUFHeader:
    """The header of the GGUF at ``path`` (``size`` and ``mtime_ns`` key the memo: a changed file is read
    again). Raises what gguf's reader raises on a damaged file."""
    import gguf as gguf_library

    reader = gguf_library.GGUFReader(path)
    _READER_FOR_CONVERSION.put((path, size, mtime_ns), reader)

    def value(key: str) -> object:
        field = reader.fields.get(key)
        return None if field is None or not field.data else field.parts[field.data[0]]

    architecture = bytes(value("general.architecture")).decode("utf-8")

    def number(key: str) -> int | None:
        found = value(f"{architecture}.{key}")
        return None if found is None else int(found[0])

    return GGUFHeader(architecture, "tokenizer.ggml.tokens" in reader.fields, number("block_count"),
                      number("context_length"), number("embedding_length"),
                      any(tensor.name == "output.weight" for tensor in reader.tensors))


@contextmanager
def _parsed_once(gguf: Path, name: str) -> Iterator[None]:
    """While converting, gguf parses each file once and builds each tensor-name map once.

    ``transformers`` reads a GGUF's header three times for one load (the configuration, the tokenizer and the
    weights each make their own ``GGUFReader``: ≈ 3 CPU s apiece for SmolLM2's 49,152-token vocabulary) and
    builds gguf's tensor-name map once per module (395 times for SmolLM2: ≈ 7 CPU s), about half of a
    conversion. The file does not change during one (it is hashed), and transformers only reads both objects,
    so within this block they are shared, starting from the reader the header check just parsed when it read
    this same file version (≈ 2 CPU s more). Both names are looked up on the ``gguf`` module at each call
    (``from gguf import …`` inside transformers' functions), which is where they are replaced.
    """
    try:
        import gguf as gguf_library
    except ImportError as error:
        raise MissingExtraError("llm", f"model {name!r} (GGUF file {gguf.name})") from error

    original_reader, original_name_map = gguf_library.GGUFReader, gguf_library.get_tensor_name_map
    made: dict[tuple, Any] = {}  # this block's readers and name maps, dropped with it
    real_path, status = os.path.realpath(gguf), gguf.stat()
    checked = (real_path, status.st_size, status.st_mtime_ns)
    if checked in _READER_FOR_CONVERSION:  # the header check's reader of this very file version: not parsed again
        made[("reader", real_path, "r")] = _READER_FOR_CONVERSION.get(checked, lambda: None)
    _READER_FOR_CONVERSION.clear()

    def shared_reader(path: os.PathLike[str] | str, mode: str = "r") -> Any:
        key = ("reader", os.path.realpath(path), mode)
        if key not in made:
            made[key] = original_reader(path, mode)
        return made[key]

    def shared_name_map(*arguments: Any) -> Any:
        key = ("name map", *arguments)
        if key not in made:
            made[key] = original_name_map(*arguments)
        return made[key]

    gguf_library.GGUFReader, gguf_library.get_tensor_name_map = shared_reader, shared_name_map
    try:
        yield
    finally:
        gguf_library.GGUFReader, gguf_library.get_tensor_name_map = original_reader, original_name_map
        made.clear()
        _READER_FOR_CONVERSION.clear()  # a header read inside the block kept its reader: not needed any more


def convert_gguf(gguf: Path, name: str) -> Path:
    """The cached float32 model folder of ``gguf``, dequantising it first when it is not cached yet.

    The folder is a cache entry like token states: ``source.json`` holds the SHA-256 of its
    ``model.safetensors``, checked on load (once per file version in a process); a damaged or deleted
    entry (``cache clear``, eviction under the budget) is converted again with a warning. Built in a
    private staging folder and renamed into place: a reader never sees a half-written folder, and when two
    processes convert the same file the second finds the first's folder there and discards its own. A cache that cannot take it (read-only, full) gets one warning and a temporary folder instead.
    """
    target = converted_gguf_folder(gguf)
    remove_orphan_staging(target)  # left by a converter killed mid-write
    problem = _entry_problem(target)
    if problem is None:
        return target
    if problem != "absent":
        warnings.warn(f"converted GGUF folder {target} is {problem}; converting {gguf.name} again", RuntimeWarning, stacklevel=2)
    staging = staging_path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _convert_into(gguf, name, staging)
            _put_in_place(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:
        warn_unwritable(target.parent, error)
        return _temporary_conversion(gguf, name)
    record_cache_write(sum(item.stat().st_size for item in target.iterdir()))  # before it may be evicted itself
    mark_recomputable(target)
    return target


def _entry_problem(target: Path) -> str | None:
    """None when ``target`` is a complete conversion whose weights match their checksum; else what is wrong."""
    if not (target / ".complete").exists():
        return "incomplete (removed or never finished)" if target.exists() else "absent"
    try:
        recorded = json.loads((target / "source.json").read_text()).get("model_sha256")
        actual = content_sha256(target / "model.safetensors")
    except (OSError, ValueError, AttributeError):
        return "missing its weights or source.json"
    if actual != recorded:
        return "damaged (model.safetensors does not match its checksum)"
    return None


def _put_in_place(staging: Path, target: Path) -> None:
    """Rename the finished ``staging`` folder to ``target``. When two processes convert at once the second
    finds a whole folder there and its own copy is discarded; a damaged or emptied entry is moved aside
    (one rename, so no reader sees it half removed) and replaced."""
    if target.exists():
        if _entry_problem(target) is None:
            return  # another process got there first
        aside = target.with_name(f".{target.name}.{os.getpid()}.damaged")
        shutil.rmtree(aside, ignore_errors=True)
        try:
            os.replace(target, aside)
        except FileNotFoundError:
            pass  # moved aside by another process meanwhile
        shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(staging, target)
    except OSError:
        if _entry_problem(target) is not None:  # not "another process got there first"
            raise


def _temporary_conversion(gguf: Path, name: str) -> Path:
    """A conversion in a temporary folder, once per file and process, removed when the process exits."""

    def convert() -> Path:
        folder = Path(tempfile.mkdtemp(prefix="embedlab-gguf-"))
        atexit.register(shutil.rmtree, folder, True)
        _convert_into(gguf, name, folder / "model")
        return folder / "model"

    return _TEMPORARY_CONVERSIONS.get(content_sha256(gguf), convert)


def _convert_into(gguf: Path, name: str, staging: Path) -> None:
    """Dequantise ``gguf`` into the model folder ``staging`` (created here), after checking what it holds."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging
    from safetensors.torch import save_file

    transformers_logging.disable_progress_bar()
    where = f"model {name!r}: GGUF file {gguf}"
    from transformers import modeling_gguf_pytorch_utils

    # transformers' own de-quantising bar follows embedlab's progress setting (none off a terminal, none when quiet)
    with _parsed_once(gguf, name), quiet_load_report(), library_bars(modeling_gguf_pytorch_utils):
        own_head = gguf_header(gguf, name).own_output_head  # usually answered from the check at load; else the one parse
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        # an untied output.weight is the model's own head: kept (as lm_head.weight) for neural's decoders
        model_class = AutoModelForCausalLM if own_head else AutoModel
        model, info = model_class.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True,
                                                  dtype=torch.float32, output_loading_info=True)
    check_loaded_model(model, info, tokenizer, where)
    staging.mkdir(parents=True)
    # save_pretrained refuses a model loaded from GGUF (it counts as quantised); the dequantised weights are
    # plain float32 tensors, so they are written as one safetensors file next to a config without the
    # quantisation entry, which makes an ordinary model folder.
    state = {key: tensor.detach().contiguous() for key, tensor in model.state_dict().items()}
    try:
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
    except Exception as error:  # noqa: BLE001 - safetensors reports a failed write (a full disk) as its own type
        raise OSError(errno.EIO, f"could not write the converted weights ({error})", str(staging)) from None
    os.chmod(staging / "model.safetensors", 0o644)  # save_file creates it private; the cache is shared
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    if own_head:
        config.tie_word_embeddings = False
    config.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    weights_sha256 = file_sha256(staging / "model.safetensors")
    (staging / "source.json").write_text(json.dumps({"gguf": str(gguf), "sha256": content_sha256(gguf),
                                                     "model_sha256": weights_sha256}) + "\n")
    (staging / ".complete").write_text("ok\n")
