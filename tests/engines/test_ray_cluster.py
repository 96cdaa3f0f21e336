"""Ray past one machine: a cluster of two nodes, attached to by address from another process.

``ray.cluster_utils.Cluster`` starts two real Ray nodes on this machine — two raylets, each with its own
object store and worker processes, the head's GCS shared, exactly what ``ray start --head`` and
``ray start --address=HEAD`` make on two machines (docs/scale.md). ``embedlab embed --engine ray
--address`` then runs as its own driver process, as a user's would, and each node gets one actor (one CPU
each, two workers), so rows cross from a worker node's object store to the driver's. What this machine
cannot test is a network between the nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from embedlab.engines.runner import embed_corpus
from embedlab.engines.shards import read_shards
from embedlab.runtime.memo import clear
from ray_helpers import own_encoder_actors
import preloaded  # tests/preloaded.py: the driver forked from a preloaded Python
from tolerance import UNIT_ATOL

ray = pytest.importorskip("ray")

# one xdist worker runs every Ray test: they count Ray's processes machine-wide, and two local Rays would
# compete for the same two cores
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def two_nodes():
    """A head node and one more node, one CPU each; shut down afterwards."""
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


@pytest.mark.crosspath
def test_a_driver_attached_by_address_uses_both_nodes_and_gives_the_local_vectors(two_nodes, tmp_path, sts_sentences,
                                                                                 monkeypatch):
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps({"id": index, "text": text}) + "\n" for index, text in enumerate(sts_sentences[:48])))
    environment = {**os.environ, "EMBEDLAB_CACHE": str(tmp_path / "ray-cache"), "HF_HUB_OFFLINE": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    environment.pop("RAY_ADDRESS", None)
    driver = preloaded.Popen([sys.executable, "-m", "embedlab", "embed", "minilm", "--input", str(source), "--out",
                              str(tmp_path / "ray"), "--shard-size", "16", "--engine", "ray", "--address", two_nodes.address,
                              "--workers", "2", "--quiet"], env=environment, cwd=REPO_ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    actors: dict[int, int] = {}
    while driver.poll() is None:  # the actors live for the run: note which raylet started each
        actors.update(own_encoder_actors())
        time.sleep(0.25)  # each look reads all of /proc; an actor lives for seconds (it loads the model)
    _, errors = driver.communicate()
    assert driver.returncode == 0, errors
    assert len(set(actors.values())) == 2, f"actors {actors} did not run under two raylets"

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "local-cache"))
    clear()
    embed_corpus("minilm", source, tmp_path / "local", shard_size=16, progress=False)
    local_ids, local_vectors = read_shards(tmp_path / "local")
    ray_ids, ray_vectors = read_shards(tmp_path / "ray")
    assert ray_ids == local_ids == list(range(48))
    # the same slices, but the actors' thread count is Ray's: float32 rounding, not bits
    assert np.abs(ray_vectors - local_vectors).max() <= UNIT_ATOL
