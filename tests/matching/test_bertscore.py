"""``embedlab.bertscore`` and ``match:…,mode=bertscore`` against the ``bert-score`` package itself (it
imports with the project's transformers, so every comparison is to the package, not to a re-derivation):
P, R and F1 on 300 STS-B test pairs with all-MiniLM-L6-v2 at every layer, idf off and on the references;
rescaling against the package's own rescaling with the same baseline file; a baseline built from
WikiText-2 equals the package's mean score over the same pairs; and each bad input's one clear error,
raised before any model runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bert_score import score as package_score

import embedlab
from embedlab.matching import bertscore_baselines, bertscore_scoring
from embedlab.models.loading import load_model, resolve_model_path
from embedlab.tokens.store import TokenStateStore, store_for
from mlm_helpers import TOKENIZER_FILES

PAIRS = 300
TOLERANCE = 1e-4

# one xdist worker runs the module: its `package` fixture (the package's model and 300 pairs, ≈ 6 CPU s) is paid once
pytestmark = pytest.mark.xdist_group("bertscore-package")


@pytest.fixture(scope="module")
def pairs(sts_test_rows, minilm) -> tuple[list[str], list[str]]:
    rows = sts_test_rows[:PAIRS]
    cands, refs = [a.strip() for _, a, _ in rows], [b.strip() for _, _, b in rows]
    # one model run keeps every layer the tests read; their per-layer calls then read the token-state cache
    store_for(minilm).compute(list(dict.fromkeys([*cands, *refs])), batch_size=64, layers=tuple(range(minilm.num_layers + 1)))
    return cands, refs


@pytest.fixture(scope="module")
def package(pairs) -> dict[bool, np.ndarray]:
    """The package's (P, R, F) × layer 0..6 × pair, idf off (False) and on (True): one all-layer run each."""
    cands, refs = pairs
    path = str(resolve_model_path("minilm"))
    results = {}
    for idf in (False, True):
        scores = package_score(cands, refs, model_type=path, num_layers=6, idf=idf, all_layers=True, nthreads=0, batch_size=64)
        results[idf] = np.stack([part.numpy() for part in scores])
    return results


@pytest.mark.parametrize(("layer", "idf"), [(6, False), (6, True), (2, False), (4, True), (0, False)])
@pytest.mark.crosspath
def test_equals_the_package(pairs, package, layer, idf):
    cands, refs = pairs
    ours = embedlab.bertscore(cands, refs, model="minilm", layer=layer if layer != 6 else None, idf=idf)
    assert all(part.dtype == np.float32 and part.shape == (PAIRS,) for part in ours)
    for name, got, expected in zip("PRF", ours, package[idf][:, layer]):
        assert np.abs(got - expected).max() <= TOLERANCE, f"{name} at layer {layer}, idf={idf}"


@pytest.mark.crosspath
def test_package_padding_floor_matters_at_the_last_layer(pairs, package):
    """Some last-layer pairs have a token whose best cosine is negative; the package floors it at 0 where
    the pair is padded. Without the floor those pairs differ, the others do not."""
    cands, refs = pairs
    plain = embedlab.bertscore(cands, refs, layer=6, package_padding=False)[2]
    differs = np.abs(plain - package[False][2, 6]) > TOLERANCE
    assert 0 < differs.sum() < 20


@pytest.mark.parametrize(("weights", "idf"), [("none", False), ("idf-refs", True)])
@pytest.mark.crosspath
def test_spec_equals_the_package_f1(pairs, package, weights, idf):
    cands, refs = pairs
    method = embedlab.load(f"match:minilm,mode=bertscore,weights={weights}")
    got = method.similarity_pairs(list(zip(cands, refs)))
    assert np.abs(got - package[idf][2, 6]).max() <= TOLERANCE
    layer_two = embedlab.load(f"match:minilm,mode=bertscore,weights={weights},layers=2").similarity_pairs(list(zip(cands, refs)))
    assert np.abs(layer_two - package[idf][2, 2]).max() <= TOLERANCE


def test_wikitext_idf_variant_is_kept(pairs, package):
    """mode=bertscore alone is still idf^W with special tokens left out (the committed records' method):
    equal to weights=idf, and not the package's number."""
    sample = list(zip(*pairs))[:20]
    default = embedlab.load("match:minilm,mode=bertscore").similarity_pairs(sample)
    explicit = embedlab.load("match:minilm,mode=bertscore,weights=idf").similarity_pairs(sample)
    np.testing.assert_array_equal(default, explicit)
    assert np.abs(default - package[False][2, 6, :20]).max() > 1e-3


@pytest.mark.crosspath
def test_rescaling_equals_the_package_with_the_same_baseline_file(pairs, tmp_path):
    cands, refs = pairs[0][:30], pairs[1][:30]
    baseline = tmp_path / "minilm.tsv"
    rows = ["LAYER,P,R,F"] + [f"{layer},{0.30 + 0.01 * layer},{0.32 + 0.01 * layer},{0.31 + 0.01 * layer}" for layer in range(7)]
    baseline.write_text("\n".join(rows) + "\n")
    path = str(resolve_model_path("minilm"))
    for layer in (3,):
        expected = package_score(cands, refs, model_type=path, num_layers=layer, nthreads=0, lang="en",
                                 rescale_with_baseline=True, baseline_path=str(baseline))
        got = embedlab.bertscore(cands, refs, layer=layer, rescale=True, baseline=baseline)
        for part, reference in zip(got, expected):
            assert np.abs(part - reference.numpy()).max() <= TOLERANCE
        raw = embedlab.bertscore(cands, refs, layer=layer)
        b = np.array([0.30, 0.32, 0.31]) + 0.01 * layer
        for part, plain, value in zip(got, raw, b):  # (s − b) / (1 − b), per P, R, F
            np.testing.assert_allclose(part, (plain - value) / (1 - value), atol=1e-6)


def test_packaged_minilm_baseline_is_used_and_recorded(pairs):
    model = load_model("minilm")
    found = bertscore_baselines.check_baseline_source(model, 6, None)
    assert isinstance(found, bertscore_baselines.Baseline)
    assert found.provenance["pairs"] >= 1000 and "WikiText-2" in found.provenance["corpus"]
    assert np.all((0 < found.values) & (found.values < 1))
    cands, refs = pairs[0][:10], pairs[1][:10]
    raw = embedlab.bertscore(cands, refs)
    rescaled = embedlab.bertscore(cands, refs, rescale=True)
    np.testing.assert_allclose(rescaled[2], (raw[2] - found.values[2]) / (1 - found.values[2]), atol=1e-6)


def test_built_baseline_is_the_package_mean_over_its_pairs(tmp_path, monkeypatch):
    """A baseline built from WikiText-2 (tiny model, 96 pairs) is the package's mean P, R, F over the
    same seeded sentence pairs, and its record says how it was made."""
    from embedlab.runtime.settings import cache_dir

    (tmp_path / "cache").mkdir()
    corpus = cache_dir("corpus")  # WikiText-2 split into sentences once per machine: share it
    (tmp_path / "cache" / "corpus").symlink_to(corpus, target_is_directory=True)
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "tiny"
    tiny_bert(folder)
    model = load_model(str(folder))
    built = bertscore_baselines.build_baselines(model, [1, 2], pairs=96, seed=3)
    chosen = bertscore_baselines.baseline_pairs(bertscore_baselines.baseline_sentences(model), 96, 3)
    for layer in (1, 2):
        expected = package_score([a for a, _ in chosen], [b for _, b in chosen], model_type=str(folder), num_layers=layer, nthreads=0)
        np.testing.assert_allclose(built[layer].values, [float(part.mean()) for part in expected], atol=1e-5)
        record = json.loads((tmp_path / "cache" / "bertscore_baselines" / bertscore_baselines.baseline_name(model, layer)).read_text())
        assert record["pairs"] == 96 and record["seed"] == 3 and record["layer"] == layer
        assert record["model_fingerprint"] == model.fingerprint and "WikiText-2 train" in record["corpus"]


def tiny_bert(folder):
    """A tiny random 2-layer BERT with MiniLM's tokenizer and 512 positions (the package cuts at 512 tokens)."""
    import shutil

    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    BertModel(config).save_pretrained(folder)
    source = resolve_model_path("minilm")
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, folder / name)


def test_scores_idf_and_padding_floors_by_hand():
    from embedlab.matching.scoring import TextSide

    # candidate tokens c0, c1 against reference tokens r0, r1, r2 (unit vectors in 2-D)
    angle = np.deg2rad([0.0, 100.0])
    cand = TextSide(np.array([101, 7]), np.stack([np.cos(angle), np.sin(angle)], 1).astype(np.float32), np.array([0.0, 1.0], np.float32))
    angle = np.deg2rad([20.0, 200.0, 250.0])
    ref = TextSide(np.array([101, 8, 9]), np.stack([np.cos(angle), np.sin(angle)], 1).astype(np.float32), np.array([0.0, 1.0, 3.0], np.float32))
    cos = lambda degrees: float(np.cos(np.deg2rad(degrees)))  # noqa: E731
    # c1's best match is r0 (80° apart); r1's best is c1 (100°), r2's best is c0 (110°): both negative
    precision = cos(80.0)  # c0 ([CLS]) weighs 0
    recall = (1 * cos(100.0) + 3 * cos(110.0)) / 4
    got = bertscore_scoring.precision_recall_f1(cand, ref)
    np.testing.assert_allclose(got, [precision, recall, 2 * precision * recall / (precision + recall)], atol=1e-6)
    floored = bertscore_scoring.precision_recall_f1(cand, ref, floor_recall=True)  # negative maxima meet padding: 0
    assert floored[1] == pytest.approx(0.0, abs=1e-7) and floored[2] == 0.0
    # the package pads each batch to its longest candidate and reference
    floor_p, floor_r = bertscore_scoring.padding_floors([3, 5, 5, 2], [4, 4, 6, 1], batch_size=3)
    assert floor_p.tolist() == [True, True, False, False] and floor_r.tolist() == [True, False, False, False]
    # idf over M = 3 references: log((M + 1) / (df + 1)), log(M + 1) for an unseen token
    idf = bertscore_scoring.reference_idf([np.array([101, 5, 6, 102]), np.array([101, 5, 102]), np.array([101, 7, 7, 102])], 110)
    assert idf[101] == idf[102] == 0.0
    np.testing.assert_allclose(idf[[5, 6, 7, 8]], np.log([4 / 3, 4 / 2, 4 / 2, 4 / 1]))


@pytest.mark.crosspath
def test_explain_follows_the_package_special_tokens():
    explanation = embedlab.load("match:minilm,mode=bertscore,weights=none").explain("A cat sits.", "A dog sits.")
    assert explanation.tokens_a[0] == "[CLS]" and explanation.tokens_a[-1] == "[SEP]"
    assert explanation.weights_a[0] == explanation.weights_a[-1] == 0 and explanation.weights_a[1] == 1
    f1 = embedlab.bertscore(["A cat sits."], ["A dog sits."])[2][0]
    assert explanation.similarity == pytest.approx(float(f1), abs=1e-5)


# --- bad input: one clear error each, before any model runs -----------------------------------------

@pytest.fixture
def model_must_not_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model ran before the input was checked")

    monkeypatch.setattr(TokenStateStore, "_run_model", refuse)


@pytest.mark.parametrize(
    ("cands", "refs", "options", "message"),
    [
        (["a", "b"], ["a"], {}, r"different numbers of candidates \(2\) and references \(1\)"),
        (["a cat", "  "], ["a dog", "a bird"], {}, "candidate 1 is empty"),
        (["a cat", "a dog"], ["", "a bird"], {}, "reference 0 is empty"),
        (["a cat"], ["a dog"], {"layer": 7}, "layer 7 is beyond minilm's depth: it has layers 0 .* to 6"),
        (["a cat"], ["a cat"], {"idf": True}, "no token with a weight above 0"),
        # the package's score([], []) ends in an IndexError (refs[0]): a clear error here
        ([], [], {}, r"bertscore needs at least one \(candidate, reference\) pair; both lists are empty"),
    ],
)
def test_bad_input(model_must_not_run, cands, refs, options, message):
    with pytest.raises(ValueError, match=message):
        embedlab.bertscore(cands, refs, **options)


def test_rescale_without_baseline_or_corpus(model_must_not_run, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path / "no-data"))
    folder = tmp_path / "tiny"
    tiny_bert(folder)
    with pytest.raises(FileNotFoundError, match="no BERTScore baseline for .* layer 2 yet, and no corpus to build one"):
        embedlab.bertscore(["a cat"], ["a dog"], model=str(folder), rescale=True)


def test_spec_bad_input(model_must_not_run):
    from embedlab.spec import SpecError

    with pytest.raises(SpecError, match="idf-refs"):
        embedlab.load("match:minilm,weights=idf-refs")
    with pytest.raises(SpecError, match="leave special unset"):
        embedlab.load("match:minilm,mode=bertscore,weights=none,special=include")
    with pytest.raises(ValueError, match="reference 1 is empty"):
        embedlab.load("match:minilm,mode=bertscore,weights=none").similarity_pairs([("a", "b"), ("c", " ")])
    with pytest.raises(ValueError, match="explain one pair"):
        embedlab.load("match:minilm,mode=bertscore,weights=idf-refs").explain("a cat", "a dog")
