"""Content hashes of models: the fingerprint the caches and the results database key on, the narrower
weights fingerprint that shipped heads and token weights record, and a GGUF file's content hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

from embedlab.runtime.cache.hashing import file_sha256
from embedlab.runtime.memo import cached


@cached("file content hashes")
def _remembered_sha256(path: str, stamp: tuple) -> str:
    return file_sha256(path)


def content_sha256(path: Path) -> str:
    """The SHA-256 of a model file (a GGUF, converted weights), remembered per path, size and modification
    time in this process: a multi-GB file is hashed once, a changed one again."""
    status = path.stat()
    return _remembered_sha256(str(path.resolve()), (status.st_size, status.st_mtime_ns))


def weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    return files


# The files whose bytes the original fingerprint hashed (shipped heads and token weights name it).
_WEIGHTS_FINGERPRINT_FILES = ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


# Everything else that changes what a model computes: every configuration, vocabulary and weight file at
# any depth (sentence-transformers modules such as 1_Pooling/config.json, 2_Dense/model.safetensors,
# sentence_bert_config.json's max_seq_length, merges, sentencepiece models). Documentation, hidden files
# and exported copies that are never loaded (onnx, openvino) are left out.
_CONTENT_SUFFIXES = frozenset({".json", ".txt", ".model", ".tiktoken", ".safetensors", ".bin", ".py", ".gguf"})


_UNLOADED_FOLDERS = frozenset({"onnx", "openvino", ".git", ".cache"})


def _content_files(path: Path) -> list[Path]:
    """Every file of a model folder that can change its computation (see ``_CONTENT_SUFFIXES``), sorted."""
    found = []
    for file in path.rglob("*"):
        relative = file.relative_to(path)
        if any(part.startswith(".") or part in _UNLOADED_FOLDERS for part in relative.parts[:-1]):
            continue
        if file.name.startswith(".") or file.suffix.lower() not in _CONTENT_SUFFIXES or not file.is_file():
            continue
        found.append(file)
    return sorted(found, key=lambda file: file.relative_to(path).as_posix())


@cached("model fingerprints")
def _fingerprints_of(path: str, stamp: tuple) -> tuple[str, str]:
    """(content fingerprint, weights fingerprint) of a model folder, each file read once."""
    folder = Path(path)
    legacy = hashlib.sha256()
    per_file: dict[str, str] = {}

    def digest_of(file: Path, also=None) -> None:
        own = hashlib.sha256()
        with open(file, "rb") as stream:
            for block in iter(lambda: stream.read(8 << 20), b""):
                own.update(block)
                if also is not None:
                    also.update(block)
        per_file[file.relative_to(folder).as_posix()] = own.hexdigest()

    for name in _WEIGHTS_FINGERPRINT_FILES:
        file = folder / name
        if file.exists():
            legacy.update(name.encode())
            digest_of(file, legacy)
    for file in weight_files(folder):
        legacy.update(file.name.encode())
        digest_of(file, legacy)
    for file in _content_files(folder):
        if file.relative_to(folder).as_posix() not in per_file:
            digest_of(file)
    content = hashlib.sha256(b"embedlab model content 2\n")
    for name in sorted(per_file):
        content.update(f"{name}\0{per_file[name]}\n".encode())
    return content.hexdigest()[:16], legacy.hexdigest()[:16]


def _stamp(path: Path) -> tuple:
    return tuple((file.relative_to(path).as_posix(), file.stat().st_size, file.stat().st_mtime_ns)
                 for file in sorted({*_content_files(path), *weight_files(path)}))


def model_fingerprint(path: Path) -> str:
    """A content hash of a model folder: every file that changes what it computes (configurations of the
    model, its tokenizer and its sentence-transformers modules, vocabularies, weights). The caches and the
    results database key on it, so a file changed at the same path is never taken for the old one."""
    return _fingerprints_of(str(path), _stamp(path))[0]


def transformer_fingerprint(path: Path) -> str:
    """The narrower hash (model config, tokenizer, top-level weights: the transformer, not only its weights)
    that shipped masked-LM heads, learned token weights and BERTScore baselines record: they depend on the
    transformer only, not on sentence-transformers' pooling modules, so they are matched on this. The value
    is what it always was (shipped files hold it); only the name changed, from ``weights_fingerprint``."""
    return _fingerprints_of(str(path), _stamp(path))[1]
