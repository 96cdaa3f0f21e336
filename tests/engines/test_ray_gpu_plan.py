"""The Ray engine's actor plan: neural actors ask for a GPU each where the cluster has GPUs (no Ray started here)."""

from __future__ import annotations

from embedlab.engines.ray_engine import actor_plan, uses_gpu


def test_neural_actors_take_one_gpu_each_where_the_cluster_has_gpus() -> None:
    eight_gpus = {"CPU": 128.0, "GPU": 8.0, "memory": 1e12}
    assert actor_plan("neural:minilm", eight_gpus, None) == (8, {"num_cpus": 1, "num_gpus": 1.0})
    assert actor_plan("neural:minilm,softmax=candidates", {"CPU": 1024.0, "GPU": 64.0}, None) == (64, {"num_cpus": 1, "num_gpus": 1.0})
    assert actor_plan("neural:minilm", eight_gpus, 16) == (16, {"num_cpus": 1, "num_gpus": 0.5})  # more actors than GPUs share them
    assert actor_plan("neural:minilm", eight_gpus, 4) == (4, {"num_cpus": 1, "num_gpus": 1.0})
    assert actor_plan("neural:minilm", {"CPU": 4.0, "GPU": 0.5}, None) == (1, {"num_cpus": 1, "num_gpus": 0.5})


def test_other_methods_and_gpu_less_clusters_keep_one_cpu_per_actor() -> None:
    assert actor_plan("neural:minilm", {"CPU": 16.0}, None) == (16, {"num_cpus": 1})
    assert actor_plan("minilm", {"CPU": 16.0, "GPU": 8.0}, None) == (16, {"num_cpus": 1})
    assert actor_plan("neural:minilm,device=cpu", {"CPU": 16.0, "GPU": 8.0}, 3) == (3, {"num_cpus": 1})
    assert uses_gpu("minilm+neural:minilm") and not uses_gpu("minilm+neural:minilm,device=cpu") and not uses_gpu("minilm")
