"""The Ray engine on a real local Ray (started once for this module): the same vectors as the local engine
for a pooled spec, a post-processed spec and a neural spec, and no text lost or repeated when an actor
process is killed mid-run.

Every Ray run starts fresh actor processes (each imports torch and loads the model), so these tests
take tens of seconds each and are marked slow.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import embedlab
from embedlab.engines.runner import embed_corpus
from embedlab.engines.shards import read_shards
from embedlab.runtime.memo import clear
from ray_helpers import own_encoder_actors, still_running
from tolerance import UNIT_ATOL

ray = pytest.importorskip("ray")

# one xdist worker runs every Ray test: they count Ray's processes machine-wide, and two local Rays would
# compete for the same two cores
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module (2 CPUs, no dashboard, no usage stats), shut down afterwards."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # address="local": a new local Ray, never one found through RAY_ADDRESS or /tmp/ray/ray_current_cluster
    # (another test's cluster, or another user's on this machine)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    actors = set(own_encoder_actors())
    ray.shutdown()
    deadline = time.monotonic() + 60  # actor processes exit once they notice their raylet is gone
    while still_running(actors) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not still_running(actors), "Ray actor processes outlived ray.shutdown()"


@pytest.fixture
def separate_caches(tmp_path, monkeypatch):
    """Switch to an empty cache root (the local run's cached token states must not feed the Ray run)."""

    def switch(name: str) -> None:
        monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / name))
        clear()

    return switch


def _texts_file(tmp_path: Path, texts: list[str]) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"id": index * 10, "text": text}) + "\n" for index, text in enumerate(texts)))
    return path


@pytest.mark.crosspath
def test_ray_equals_the_local_engine_for_a_post_processed_spec(local_ray, tmp_path, sts_sentences, separate_caches):
    """The fitted state travels to the actors: a z-scored spec's Ray shards equal the local engine's (plain ``minilm``
    on Ray against a local encode: the killed-actor test below)."""
    spec = "minilm:post=zscore+normalize"
    source = _texts_file(tmp_path, sts_sentences[:24])
    separate_caches("local-cache")
    embed_corpus(spec, source, tmp_path / "local", shard_size=10, progress=False)
    separate_caches("ray-cache")
    result = embed_corpus(spec, source, tmp_path / "ray", shard_size=10, engine="ray", workers=1, progress=False)
    assert (result.texts, result.shards_written) == (24, 3)
    local_ids, local_vectors = read_shards(tmp_path / "local")
    ray_ids, ray_vectors = read_shards(tmp_path / "ray")
    assert ray_ids == local_ids == [index * 10 for index in range(24)]
    # the same slices, but an actor's thread count is Ray's, not this process's: float32 rounding, not bits
    assert np.abs(ray_vectors - local_vectors).max() <= UNIT_ATOL
    assert any((tmp_path / "ray-cache").iterdir())  # the actors computed (and cached) in their own cache


@pytest.mark.crosspath
def test_ray_equals_the_local_engine_for_neural_embeddings(local_ray, tmp_path, sts_sentences, separate_caches):
    source = _texts_file(tmp_path, sts_sentences[:3])
    separate_caches("local-cache")
    embed_corpus("neural:minilm,epochs=3", source, tmp_path / "local", progress=False)
    separate_caches("ray-cache")
    # one actor: rows gathered in order from two actors are asserted by the killed-actor test and
    # test_eval_engine_ray_gives_the_local_scores below; a neural vector does not depend on its batch (tests/neural)
    embed_corpus("neural:minilm,epochs=3", source, tmp_path / "ray", engine="ray", workers=1, progress=False)
    local_vectors, ray_vectors = read_shards(tmp_path / "local")[1], read_shards(tmp_path / "ray")[1]
    cosines = np.einsum("ij,ij->i", local_vectors, ray_vectors) / (
        np.linalg.norm(local_vectors, axis=1) * np.linalg.norm(ray_vectors, axis=1))
    # micro-tuning's gradient steps amplify float32 rounding (docs/neural.md): directions to cosine 1 - 1e-5
    assert local_vectors.shape == (3, ray_vectors.shape[1]) and cosines.min() >= 0.99999


@pytest.mark.crosspath
def test_a_killed_actor_loses_and_repeats_no_text(local_ray, tmp_path, sts_test_rows, separate_caches):
    texts = list(dict.fromkeys(text for _, a, b in sts_test_rows for text in (a, b)))[:400]
    source = _texts_file(tmp_path, texts)
    out = tmp_path / "ray"
    killed: list[int] = []

    def kill_an_actor_after_the_first_shard() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            manifest = out / "manifest.json"
            if manifest.exists() and json.loads(manifest.read_text())["shards"]:
                pids = sorted(own_encoder_actors())  # this run's actors, never another user's
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
            time.sleep(0.05)

    separate_caches("ray-cache")
    killer = threading.Thread(target=kill_an_actor_after_the_first_shard, daemon=True)
    killer.start()
    result = embed_corpus("minilm", source, out, shard_size=40, engine="ray", workers=2, progress=False)
    killer.join(timeout=1)
    assert killed, "no actor was killed: the run finished before the first shard was seen"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and result.shards_written == 10
    assert sum(entry["rows"] for entry in manifest["shards"]) == 400
    ids, vectors = read_shards(out)
    assert ids == [index * 10 for index in range(400)]  # every text once, in input order
    separate_caches("local-cache")
    assert np.abs(vectors - embedlab.load("minilm").encode(texts)).max() <= UNIT_ATOL  # shards of 40 vs one encode: other batches


@pytest.mark.crosspath
def test_eval_engine_ray_gives_the_local_scores(local_ray, tmp_path, sts_test_rows, separate_caches, capsys):
    """``eval --engine ray`` on two actors (RayEncodedMethod: the 16 texts' slices spread over both and gathered back
    in order) gives the local run's metrics; what a run asks the wrapped method is the wrapped method's answer."""
    from embedlab.cli.app import main
    from embedlab.engines.ray_engine import RayEncodedMethod

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{score}\n" for score, a, b in sts_test_rows[:8]), encoding="utf-8")
    arguments = ["eval", "minilm", "--tasks", f"sts:@{pairs}", "--no-db", "--quiet", "--format", "json"]
    separate_caches("local-cache")
    assert main(arguments) == 0
    local = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    separate_caches("ray-cache")  # also an empty evaluation cache: the Ray run encodes for itself
    assert main([*arguments, "--engine", "ray", "--workers", "2"]) == 0
    on_ray = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [record["metric"] for record in on_ray] == [record["metric"] for record in local] and "spearman" in {r["metric"] for r in local}
    for ours, theirs in zip(on_ray, local):  # correlations of cosines that agree to float32 rounding
        assert abs(ours["value"] - theirs["value"]) <= UNIT_ATOL
    # a retrieval run's questions (does it fit on its target, its query/document prompts) get the wrapped method's
    # answers; bit-identical by construction: a target-fitted spec's prompted side is encoded in this process, in the
    # same call (10 texts: the fewest a z-score fitted on the texts being encoded takes)
    asymmetric = embedlab.load("minilm:post=zscore,query_template=e5-query")
    wrapped = RayEncodedMethod(asymmetric, workers=2)
    assert wrapped.spec == asymmetric.spec and wrapped.fingerprint == asymmetric.fingerprint
    assert wrapped.fits_on_target and wrapped.prompts == {"query": "query: [X]"}
    sentences = [a for _, a, _ in sts_test_rows[:10]]
    np.testing.assert_array_equal(wrapped.encode_query(sentences), asymmetric.encode_query(sentences))
