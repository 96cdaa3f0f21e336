"""embedlab.evaluation.alignsim.task through evaluate() on the real minilm model (``st:minilm``) and small slices of the
real data: one encode per dataset, numbers recomputed independently with scikit-learn, pairwise methods without NED."""

from __future__ import annotations

import numpy as np
import pytest
from alignsim_helpers import JaccardPairwise, RecordingMethod, jaccard, load_minilm
from sklearn.metrics.pairwise import paired_cosine_distances

from embedlab.evaluation.alignsim.items import SamplingConfig
from embedlab.evaluation.alignsim.task import AlignSimSetup, AlignSimTask, MethodResult
from embedlab.evaluation.harness import evaluate, parse_tasks

CONFIG = SamplingConfig(seed=0, pairs_per_label=8, sentences=8, triplets=8, afin_pairs=8)
SETUP = AlignSimSetup(sampling=CONFIG)

# one xdist worker runs the module: its fixtures (perturbed sets, st:minilm, one evaluation: ≈ 4 CPU s) are paid once
pytestmark = pytest.mark.xdist_group("alignsim-task")


def _run(method, setup: AlignSimSetup) -> MethodResult:
    tasks = setup.tasks()
    return MethodResult.collect(method, evaluate([method], tasks, log=lambda message: None).records, tasks)


@pytest.fixture(scope="module")
def sets():
    return {name: SETUP.perturbations(name) for name in ("qqp", "paws", "mrpc", "afin")}


@pytest.fixture(scope="module")
def st_minilm():
    return load_minilm()


@pytest.fixture(scope="module")
def minilm_run(sets, st_minilm, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # a fresh encoding cache, so every encode call is seen
        patch.setenv("EMBEDLAB_CACHE", str(tmp_path_factory.mktemp("alignsim-cache")))
        method = RecordingMethod(st_minilm)
        return method, _run(method, SETUP)


def _cosine(model, pairs):
    first = model.encode([a for a, _ in pairs])
    second = model.encode([b for _, b in pairs])
    return 1.0 - paired_cosine_distances(first, second)


def test_one_encode_per_dataset_on_distinct_texts(sets, minilm_run):
    method, _ = minilm_run
    assert len(method.calls) == 4
    for call, (name, perturbations) in zip(method.calls, sets.items()):
        assert len(call) == len(set(call))
        assert set(call) == set(perturbations.texts())


def test_criterion1_and_alpha_match_an_independent_computation(sets, st_minilm, minilm_run):
    _, result = minilm_run
    random_means = []
    for name in ("qqp", "paws", "mrpc"):
        items = sets[name].items["c1"]
        positive = _cosine(st_minilm, [(i.text_a, i.text_b) for i in items if i.kind == "positive"])
        random = _cosine(st_minilm, [(i.text_a, i.text_b) for i in items if i.kind == "random"])
        random_means.append(random.mean())
        assert result.value(name, "c1", "sim_pos_mean") == pytest.approx(positive.mean(), abs=1e-4)
        assert result.value(name, "c1", "sim_rnd_mean") == pytest.approx(random.mean(), abs=1e-4)
        assert result.value(name, "c1", "sim_pass@0") == pytest.approx(np.mean(positive - random > 0), abs=1e-6)
        # a sentence encoder finds paraphrases far closer than shuffled pairs, in cosine and NED
        assert result.value(name, "c1", "sim_pos_mean") > result.value(name, "c1", "sim_rnd_mean") + 0.3
        assert result.value(name, "c1", "ned_pos_mean") < result.value(name, "c1", "ned_rnd_mean")
    alpha = 1.0 - np.mean(random_means)
    assert result.value("all", "adjustment", "alpha") == pytest.approx(alpha, abs=1e-4)
    afin = sets["afin"].items["c4"]
    affirmative = _cosine(st_minilm, [(i.original, i.perturbed) for i in afin])
    assert result.value("afin", "c4", "sim_adjusted") == pytest.approx(alpha * affirmative.mean(), abs=1e-4)


def test_every_criterion_reports_and_counts_skips(sets, minilm_run):
    _, result = minilm_run
    for name in ("qqp", "paws", "mrpc"):
        for n in (1, 2, 3):
            kept = sum(1 for item in sets[name].items["c2"] if item.n == n)
            skipped = result.value(name, f"c2/n={n}", "skipped")
            assert kept + skipped == 8
            if kept:  # short QQP questions may have fewer than n replaceable words: all skipped, none scored
                scored = next(r for r in result.records if (r.dataset, r.subset, r.metric) == (name, f"c2/n={n}", "sim_mean"))
                assert scored.n == kept
                assert 0.0 < result.value(name, f"c2/n={n}", "sim_adjusted") < 1.0
            else:
                assert result.value(name, f"c2/n={n}", "sim_mean") is None
            assert (name, f"c5/n={n}", "sim") in result.margins
        assert result.value(name, "c3", "skipped") == sets[name].skipped["c3"]
    margins = result.margins[("mrpc", "c5/n=1", "ned")]
    assert margins.dtype == np.float32 and np.abs(margins).max() <= 1.0


def test_pairwise_method_uses_its_own_similarity_and_skips_ned(sets, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    method = JaccardPairwise()
    result = _run(method, AlignSimSetup(criteria=(1, 3), datasets=("qqp", "mrpc"), sampling=CONFIG))
    assert len(method.calls) == 2  # one similarity_pairs() call per dataset
    assert {r.dataset for r in result.records} == {"qqp", "mrpc"}  # no α without criteria 2 and 4
    assert not any(r.metric.startswith("ned") for r in result.records)
    assert any("NED is skipped" in note for note in result.notes)
    items = sets["mrpc"].items["c1"]
    expected = np.mean([jaccard(i.text_a, i.text_b) for i in items if i.kind == "positive"])
    assert result.value("mrpc", "c1", "sim_pos_mean") == pytest.approx(expected, abs=1e-6)


def test_margins_survive_the_cache_budget_and_missing_ones_are_named_in_a_note(tmp_path, monkeypatch):
    from embedlab.runtime.cache.budget import clear_cache, evict_to_budget
    from embedlab.runtime.settings import cache_dir

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    method = JaccardPairwise()
    setup = AlignSimSetup(criteria=(1, 3), datasets=("qqp", "mrpc"), sampling=CONFIG)
    tasks = setup.tasks()
    records = evaluate([method], tasks, log=lambda message: None).records
    assert not [note for note in MethodResult.collect(method, records, tasks).notes if "no ε-histogram" in note]
    stored = sorted(cache_dir("alignsim-margins").glob("*.safetensors"))
    assert len(stored) == 4  # c1 and c3 on two datasets (similarity only: NED is skipped for a pairwise method)
    evict_to_budget(0)  # every recomputable entry goes; the margins are results and stay
    clear_cache()
    result = MethodResult.collect(method, records, tasks)
    assert sorted(result.margins) == sorted((d, s, "sim") for d in ("qqp", "mrpc") for s in ("c1", "c3"))
    assert not [note for note in result.notes if "no ε-histogram" in note]
    for path in stored:
        path.unlink()  # a folder deleted by hand, or a run into another cache folder
    result = MethodResult.collect(method, records, tasks)
    assert not result.margins
    assert sorted(note.split(":")[0] for note in result.notes if "no ε-histogram" in note) == ["mrpc c1", "mrpc c3", "qqp c1", "qqp c3"]


def test_adjusted_criteria_score_random_pairs_of_all_three_datasets():
    setup = AlignSimSetup(criteria=(4,), datasets=("afin",), sampling=CONFIG)
    assert setup.scored_datasets() == ["afin", "qqp", "paws", "mrpc"]
    assert setup.kinds("qqp") == {"c1"} and setup.kinds("afin") == {"c4"}
    assert [task.dataset for task in setup.tasks()] == ["afin", "all"]
    with pytest.raises(ValueError, match="unknown ALIGN-SIM criteria"):
        AlignSimSetup(criteria=(6,))
    with pytest.raises(ValueError, match="only with criterion 2 or 4"):
        AlignSimTask("all", setup=AlignSimSetup(criteria=(1,)))


def test_headlines_and_settings_are_declared():
    assert AlignSimTask.headline_of("mrpc") == "sim_diff_mean" and AlignSimTask.headline_of("afin") == "sim_adjusted"
    assert AlignSimTask.metric("sim_pass@0.3").description.startswith("C1/3/5")
    assert AlignSimTask("mrpc").settings() == {}
    assert AlignSimTask("mrpc", setup=SETUP).settings() == {"sampling": {
        "seed": 0, "pairs_per_label": 8, "sentences": 8, "triplets": 8, "afin_pairs": 8}}


def test_perturbation_is_a_task_option():
    (task,) = parse_tasks("alignsim:mrpc", perturbation="authors")
    assert task.setup.sampling.perturbation == "authors"
    assert task.settings() == {"sampling": {"seed": 0, "pairs_per_label": 2500, "sentences": 3500, "triplets": 3500,
                                            "afin_pairs": None, "perturbation": "authors"}}
    assert parse_tasks("alignsim:mrpc", perturbation="ours")[0].settings() == {}  # the default adds nothing
    with pytest.raises(ValueError, match="unknown ALIGN-SIM perturbation 'both'"):
        parse_tasks("alignsim:mrpc", perturbation="both")
