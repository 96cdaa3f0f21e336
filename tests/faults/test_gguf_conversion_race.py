"""Two processes converting the same GGUF file into the cache at once, and one of them killed with SIGKILL in the
middle of writing its converted weights: every process that finishes reads one complete converted folder and
gets the vectors of the Hugging Face model the GGUF was written from; the killed one's staging folder is swept.

The GGUF is a tiny random Llama written in the test with the ``gguf`` package (tests/decoder_helpers.py), so
each conversion takes a fraction of a second; a barrier holds both converters just before they write, so
they really overlap.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import embedlab
from embedlab.runtime.memo import clear
from decoder_helpers import tiny_gguf
from child_helpers import expect_line
import preloaded

pytest.importorskip("gguf")
pytest.importorskip("accelerate")

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent
TEXTS = ["A dog runs.", "The capital of France is Paris.", "Two women are talking about the weather."]

CHILD = textwrap.dedent("""
    import hashlib, sys, time
    from pathlib import Path
    import numpy as np
    import safetensors.torch
    import embedlab

    role, gguf, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    texts = sys.argv[4:]
    original_save = safetensors.torch.save_file

    def save_at_the_barrier(tensors, filename, metadata=None):
        if role == "killed":  # half the weights on disk, then hang until killed
            Path(filename).write_bytes(b"half a safetensors file")
            print("building", flush=True)
            time.sleep(600)
        print("building", flush=True)  # converted, about to write its staging folder
        while not go.exists():
            time.sleep(0.05)
        return original_save(tensors, filename, metadata=metadata)

    safetensors.torch.save_file = save_at_the_barrier
    vectors = np.ascontiguousarray(embedlab.load(gguf).encode(texts), dtype=np.float32)
    print("result", hashlib.sha256(vectors.tobytes()).hexdigest(), flush=True)
    import gc; gc.freeze()  # exit without a last collection over torch and the model (as the embedlab program does)
""")


def start(role: str, gguf: Path, go: Path, cache: Path) -> preloaded.Popen:
    environment = {**os.environ, "EMBEDLAB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    return preloaded.Popen([sys.executable, "-c", CHILD, role, str(gguf), str(go), *TEXTS], env=environment,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(child: preloaded.Popen) -> str:
    output, errors = child.communicate(timeout=300)
    assert child.returncode == 0, errors[-3000:]
    return next(line.split()[1] for line in output.splitlines() if line.startswith("result"))


@pytest.fixture
def tiny_model(tmp_path):
    """The GGUF file and the digest of the vectors its source Hugging Face folder gives (the clean value)."""
    gguf, folder = tiny_gguf(tmp_path / "model" / "tiny-llama.gguf")
    vectors = np.ascontiguousarray(embedlab.load(str(folder)).encode(TEXTS), dtype=np.float32)
    return gguf, hashlib.sha256(vectors.tobytes()).hexdigest()


def converted_folders(cache: Path) -> list[Path]:
    return sorted((cache / "models").iterdir())


def test_two_processes_converting_one_gguf_at_once_share_one_complete_folder(tiny_model, tmp_path) -> None:
    gguf, clean = tiny_model
    cache, go = tmp_path / "cache", tmp_path / "go"
    first, second = start("racer", gguf, go, cache), start("racer", gguf, go, cache)
    try:
        expect_line(first, "building")
        expect_line(second, "building")  # both converted the GGUF and hold their weights: neither has written
    finally:
        go.touch()
    assert finish(first) == finish(second) == clean
    folders = converted_folders(cache)
    assert [folder.name.startswith("gguf-") for folder in folders] == [True]  # one folder, no staging left
    assert (folders[0] / ".complete").exists() and (folders[0] / "model.safetensors").stat().st_size > 10_000


def test_a_converter_killed_mid_write_leaves_the_other_to_finish(tiny_model, tmp_path, monkeypatch) -> None:
    gguf, clean = tiny_model
    cache, go = tmp_path / "cache", tmp_path / "go"
    go.touch()
    killed = start("killed", gguf, go, cache)
    try:
        expect_line(killed, "building")  # half its weights written into its staging folder
        staging = [folder for folder in converted_folders(cache) if folder.name.endswith(".staging")]
        assert len(staging) == 1 and (staging[0] / "model.safetensors").exists()
        survivor = start("survivor", gguf, go, cache)
        expect_line(survivor, "building")  # converting beside the hung one (there is no lock to wait for)
    finally:
        killed.kill()  # SIGKILL mid-conversion: no cleanup handler runs
        killed.wait()
    assert killed.returncode == -9
    assert finish(survivor) == clean
    assert len(converted_folders(cache)) == 2  # the complete folder, and the killed one's staging folder
    monkeypatch.setenv("EMBEDLAB_CACHE", str(cache))
    clear()
    vectors = np.ascontiguousarray(embedlab.load(str(gguf)).encode(TEXTS), dtype=np.float32)
    assert hashlib.sha256(vectors.tobytes()).hexdigest() == clean  # the survivor's folder, read back
    folders = converted_folders(cache)
    assert [folder.name.startswith("gguf-") for folder in folders] == [True]  # the dead one's staging was swept
    assert (folders[0] / ".complete").exists()
