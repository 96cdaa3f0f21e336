"""The Ray engine's actor plan: a method that uses a GPU asks for one per actor where the cluster has GPUs (no Ray started here)."""

from __future__ import annotations

import embedlab
from embedlab.engines.ray_engine import actor_plan


def test_gpu_actors_take_one_gpu_each_where_the_cluster_has_gpus() -> None:
    eight_gpus = {"CPU": 128.0, "GPU": 8.0, "memory": 1e12}
    assert actor_plan(True, eight_gpus, None) == (8, {"num_cpus": 1, "num_gpus": 1.0})
    assert actor_plan(True, {"CPU": 1024.0, "GPU": 64.0}, None) == (64, {"num_cpus": 1, "num_gpus": 1.0})
    assert actor_plan(True, eight_gpus, 16) == (16, {"num_cpus": 1, "num_gpus": 0.5})  # more actors than GPUs share them
    assert actor_plan(True, eight_gpus, 4) == (4, {"num_cpus": 1, "num_gpus": 1.0})
    assert actor_plan(True, {"CPU": 4.0, "GPU": 0.5}, None) == (1, {"num_cpus": 1, "num_gpus": 0.5})


def test_other_methods_and_gpu_less_clusters_keep_one_cpu_per_actor() -> None:
    assert actor_plan(True, {"CPU": 16.0}, None) == (16, {"num_cpus": 1})
    assert actor_plan(False, {"CPU": 16.0, "GPU": 8.0}, None) == (16, {"num_cpus": 1})
    assert actor_plan(False, {"CPU": 16.0, "GPU": 8.0}, 3) == (3, {"num_cpus": 1})


def test_methods_say_whether_they_use_a_gpu() -> None:
    # building a method loads no model: the neural family answers from its spec (device=cpu pins it)
    assert embedlab.load("neural:minilm").uses_gpu and embedlab.load("neural:minilm,softmax=candidates").uses_gpu
    assert embedlab.load("minilm+neural:minilm").uses_gpu and not embedlab.load("minilm+neural:minilm,device=cpu").uses_gpu
    assert not embedlab.load("minilm").uses_gpu and not embedlab.load("st:minilm").uses_gpu
