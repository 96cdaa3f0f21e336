"""GGUF files: found, checked (header and tensor table only) and dequantised once into a cached float32
model folder named by the file's content hash."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from embedlab.models.fingerprints import gguf_sha256
from embedlab.models.named import ModelNotFoundError
from embedlab.runtime import MissingExtraError, cache_root, process_alive


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

    Reads the header and tensor table only (no weights are dequantised). A damaged or truncated file and
    an architecture ``transformers`` cannot convert each get their own error naming the file.
    """
    try:
        import gguf as gguf_library
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError as error:
        raise MissingExtraError("llm", f"model {name!r} (GGUF file {gguf.name})") from error
    try:
        reader = gguf_library.GGUFReader(str(gguf))
        field = reader.fields["general.architecture"]
        architecture = bytes(field.parts[field.data[0]]).decode("utf-8")
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
    check_gguf(gguf, name)
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging
    from safetensors.torch import save_file

    transformers_logging.disable_progress_bar()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    try:
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
