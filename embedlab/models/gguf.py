"""GGUF files: found, checked (header and tensor table only) and dequantised once into a cached float32
model folder named by the file's content hash."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from embedlab.models.fingerprints import gguf_sha256
from embedlab.models.named import ModelNotFoundError
from embedlab.runtime import MissingExtraError, cache_root, cached, process_alive


GGUF_FORMAT = "1"  # bump when the converted folder's layout changes: older conversions are then redone


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
    return cache_root(create=False) / "models" / f"gguf-{gguf_sha256(gguf)[:24]}-v{GGUF_FORMAT}"


def check_gguf(gguf: Path, name: str) -> str:
    """The GGUF's architecture, after checking the file reads and ``transformers`` knows the architecture.

    Reads the header and tensor table only (no weights are dequantised), once per file version in a process
    (the check at ``embedlab.load`` and the conversion's own). A damaged or truncated file and an
    architecture ``transformers`` cannot convert each get their own error naming the file.
    """
    try:
        import gguf as gguf_library  # noqa: F401  (the extra's presence, before anything is read)
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError as error:
        raise MissingExtraError("llm", f"model {name!r} (GGUF file {gguf.name})") from error
    status = gguf.stat()
    try:
        architecture = _architecture(str(gguf.resolve()), status.st_size, status.st_mtime_ns)
    except (ValueError, KeyError, IndexError, OSError) as error:
        raise ModelNotFoundError(
            f"model {name!r}: GGUF file {gguf} is damaged or truncated ({error}); "
            "re-install the package or copy the file again") from None
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES and architecture.replace("-", "_") not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ModelNotFoundError(
            f"model {name!r}: GGUF file {gguf} holds a {architecture!r} model, which transformers cannot read from GGUF "
            f"(it reads: {', '.join(sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ('general', 'tokenizer')))}); "
            "convert it to a Hugging Face folder (config.json + safetensors) and give that folder")
    return architecture


@cached("models.gguf_architecture")
def _architecture(path: str, size: int, mtime_ns: int) -> str:
    """``general.architecture`` of the GGUF at ``path`` (``size`` and ``mtime_ns`` key the memo: a changed file
    is read again). Raises what gguf's reader raises on a damaged file."""
    import gguf as gguf_library

    reader = gguf_library.GGUFReader(path)
    field = reader.fields["general.architecture"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


@contextmanager
def _parsed_once(gguf: Path, name: str) -> Iterator[None]:
    """While converting, gguf parses each file once and builds each tensor-name map once.

    ``transformers`` reads a GGUF's header three times for one load (the configuration, the tokenizer and the
    weights each make their own ``GGUFReader``: ≈ 3 CPU s apiece for SmolLM2's 49,152-token vocabulary) and
    builds gguf's tensor-name map once per module (395 times for SmolLM2: ≈ 7 CPU s), about half of a
    conversion. The file does not change during one (it is hashed), and transformers only reads both objects,
    so within this block they are shared. Both names are looked up on the ``gguf`` module at each call
    (``from gguf import …`` inside transformers' functions), which is where they are replaced.
    """
    try:
        import gguf as gguf_library
    except ImportError as error:
        raise MissingExtraError("llm", f"model {name!r} (GGUF file {gguf.name})") from error

    original_reader, original_name_map = gguf_library.GGUFReader, gguf_library.get_tensor_name_map
    made: dict[tuple, Any] = {}  # this block's readers and name maps, dropped with it

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


def convert_gguf(gguf: Path, name: str) -> Path:
    """The cached float32 model folder of ``gguf``, dequantising it first when it is not cached yet.

    Built in a private staging folder and renamed into place: a reader never sees a half-written folder,
    and when two processes convert the same file the second rename finds the folder there and its own
    copy is discarded.
    """
    target = converted_gguf_folder(gguf)
    for abandoned in target.parent.glob(f".{target.name}.*.staging"):  # left by a converter killed mid-write
        pid = abandoned.name[len(target.name) + 2 : -len(".staging")]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(abandoned, ignore_errors=True)
    if (target / ".complete").exists():
        return target
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging
    from safetensors.torch import save_file

    transformers_logging.disable_progress_bar()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with _parsed_once(gguf, name):
            check_gguf(gguf, name)  # usually answered from the check at load; else the one parse of the file
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
            model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True, dtype=torch.float32)
        staging.mkdir(parents=True)
        # save_pretrained refuses a model loaded from GGUF (it counts as quantised); the dequantised weights are
        # plain float32 tensors, so they are written as one safetensors file next to a config without the
        # quantisation entry, which makes an ordinary model folder.
        state = {key: tensor.detach().contiguous() for key, tensor in model.state_dict().items()}
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
        os.chmod(staging / "model.safetensors", 0o644)  # save_file creates it private; the cache is shared
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "source.json").write_text(json.dumps({"gguf": str(gguf), "sha256": gguf_sha256(gguf)}) + "\n")
        (staging / ".complete").write_text("ok\n")
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / ".complete").exists():  # not "another process got there first"
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
