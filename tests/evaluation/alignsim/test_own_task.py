"""embedlab.evaluation.alignsim.own_task (and own_items): ``alignsim:@FILE`` on real sentences through the harness: a
known property of random token vectors, the headline recomputed from the criteria's records, α from the file's own
random pairs, skips counted, pairs files with criterion 1, and every bad file refused before any encoding."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from fakes import FakeMethod

import embedlab
from embedlab.errors import InputError
from embedlab.evaluation.alignsim.items import SamplingConfig
from embedlab.evaluation.alignsim.own_items import build_own_set
from embedlab.evaluation.alignsim.own_task import HEADLINE, NO_PAIRS_NOTE, OwnTextsTask
from embedlab.evaluation.harness import evaluate, headline_of, parse_tasks

SENTENCE_COUNT = 24
# one xdist worker runs the ALIGN-SIM modules: WordNet, spaCy and the model are loaded once
pytestmark = pytest.mark.xdist_group("alignsim-task")


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory, sts_sentences):
    path = tmp_path_factory.mktemp("own") / "my_texts.txt"
    path.write_text("\n".join(sts_sentences[:SENTENCE_COUNT]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(texts_file):
    """random:minilm (no bootstrap) and minilm (B = 200) on the same real sentences: {spec: {(subset, metric): record}}."""
    found = {}
    for spec, resamples in (("random:minilm", 0), ("minilm", 200)):
        tasks = parse_tasks(f"alignsim:@{texts_file}")
        records = evaluate([embedlab.load(spec)], tasks, log=lambda message: None, bootstrap=resamples).records
        found[spec] = {(record.subset, record.metric): record for record in records}
    return found


def test_random_token_vectors_cannot_tell_a_jumbled_sentence_and_minilm_can(runs):
    # random:minilm averages context-free token vectors: a jumbled sentence has the same tokens, so the same mean
    for n in (1, 2, 3):
        assert runs["random:minilm"][(f"c5/n={n}", "sim_perturbed_mean")].value >= 0.999
    assert runs["minilm"][("c5/n=1", "sim_perturbed_mean")].value < 0.99


def test_at_least_three_criteria_have_records_with_intervals(runs):
    with_interval = {subset.split("/")[0] for (subset, metric), record in runs["minilm"].items()
                     if metric in ("sim_mean", "sim_margin_mean") and record.ci_low is not None}
    assert with_interval >= {"c2", "c5", "neg"}
    assert not any(subset == "c4" for subset, _ in runs["minilm"])  # the negation check never borrows C4's subsets
    headline = runs["minilm"][("triplets", HEADLINE)]
    assert headline.ci_low <= headline.value <= headline.ci_high and headline.ci_resampled == "sentences"


@pytest.mark.parametrize("spec", ["random:minilm", "minilm"])
def test_the_headline_is_the_mean_of_the_triplet_criteria_pass_rates(runs, spec):
    records = runs[spec]
    c5 = np.mean([records[(f"c5/n={n}", "sim_pass_avg")].value for n in (1, 2, 3)])
    expected = np.mean([records[("c3", "sim_pass_avg")].value, c5, records[("neg", "sim_pass_avg")].value])
    assert records[("triplets", HEADLINE)].value == pytest.approx(expected, abs=1e-9)  # float64 sums in two orders


def test_alpha_comes_from_the_files_own_random_pairs_and_says_so(runs):
    records = runs["minilm"]
    assert "file's own sentences" in records[("adjustment", "alpha")].ci_note
    assert "file's own sentences" in records[("c2/n=1", "sim_adjusted")].ci_note
    alpha = records[("adjustment", "alpha")].value
    assert records[("c2/n=1", "sim_adjusted")].value == pytest.approx(records[("c2/n=1", "sim_mean")].value * alpha, abs=1e-12)
    assert records[("c1", "skipped")].ci_note == NO_PAIRS_NOTE  # no pairs in a texts file: criterion 1 skipped


def test_every_sentence_is_kept_or_counted_and_random_pairs_are_a_derangement(sts_sentences):
    sentences = sts_sentences[:SENTENCE_COUNT]
    from embedlab.data.own_texts import OwnTexts

    texts = OwnTexts("f.txt", sentences, list(range(1, len(sentences) + 1)), len(sentences), 0)
    built = build_own_set("f@0", texts, None, SamplingConfig())
    assert build_own_set("f@0", texts, None, SamplingConfig()) == built  # one seed fixes every draw
    kept = Counter(item.n for item in built.items["c2"])
    for n in (1, 2, 3):
        assert kept[n] + built.skipped[f"c2/n={n}"] == len(sentences)
        assert sum(item.n == n for item in built.items["c5"]) + built.skipped[f"c5/n={n}"] == len(sentences)
    for kind in ("c3", "neg"):
        assert len(built.items[kind]) + built.skipped[kind] == len(sentences)
    # the positive of every triplet is S's one-synonym version (criterion 2 at n = 1)
    synonym = {item.original: item.perturbed for item in built.items["c2"] if item.n == 1}
    assert all(item.paraphrase == synonym[item.original] for kind in ("c3", "c5", "neg") for item in built.items[kind])
    random = built.items["c1"]
    assert all(item.kind == "random" and item.text_a != item.text_b for item in random)
    assert sorted(item.text_a for item in random) == sorted(item.text_b for item in random) == sorted(sentences)


def test_a_pairs_file_runs_criterion_1_on_its_positive_pairs(tmp_path, sts_test_rows):
    # 22 pairs scored at least 4 (positives) and 10 below, from STS-B test
    rows = [row for row in sts_test_rows if row[0] >= 4][:22] + [row for row in sts_test_rows if row[0] < 4][:10]
    path = tmp_path / "pairs.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for s, a, b in rows), encoding="utf-8")
    positive = [(a, b) for s, a, b in rows if s >= 4]
    records = evaluate([FakeMethod()], parse_tasks(f"alignsim:@{path}"), log=lambda message: None).records
    by_key = {(r.subset, r.metric): r for r in records}
    assert by_key[("c1", "sim_pos_mean")].n == len(positive) == 22
    assert by_key[("c1", "sim_rnd_mean")].n == len(rows)  # every row's first text beside another row's second
    assert ("c1", "skipped") not in by_key
    # the triplets' positive is the file's own paraphrase of S
    task = parse_tasks(f"alignsim:@{path}")[0]
    paraphrase = dict(positive)
    assert all(item.paraphrase == paraphrase[item.original] for item in task.perturbations().items["c5"])


@pytest.mark.parametrize("case", ["empty", "19 sentences", "binary"])
def test_bad_files_are_refused_before_any_encoding(tmp_path, sts_sentences, case):
    path = tmp_path / "bad.txt"
    if case == "empty":
        path.write_text("", encoding="utf-8")
        expected = f"{path}: empty file"
    elif case == "19 sentences":
        path.write_text("\n".join(sts_sentences[:19]) + "\n", encoding="utf-8")
        expected = f"{path}: 19 usable (sentences|texts)"
    else:
        path.write_bytes(("\n".join(sts_sentences[:30]) + "\n").encode() + b"\x89PNG\r\n\x1a\n\x00\x00")
        expected = f"{path}:31: not valid UTF-8"
    method = FakeMethod()
    for family in ("alignsim", "isotropy"):
        with pytest.raises(InputError) as refused:
            evaluate([method], parse_tasks(f"{family}:@{path}"), log=lambda message: None)
        assert re.match(expected, str(refused.value)), str(refused.value)
    assert method.encode_calls == []


def test_the_task_declares_its_headline():
    [task] = parse_tasks("alignsim:@" + __file__)
    assert isinstance(task, OwnTextsTask) and task.headline_metric == HEADLINE
    assert headline_of("alignsim", task.dataset) == HEADLINE
    assert headline_of("alignsim", "qqp") == "sim_diff_mean"  # the built-in datasets keep theirs
