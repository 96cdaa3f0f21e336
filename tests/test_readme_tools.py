"""The README's "Using embedlab with other tools" snippets, run as written (the section's bash lines
through the CLI, its Python blocks with ``exec``), each checked against an independent computation:
sentence-transformers itself, numpy cosines, a hand-built scikit-learn pipeline. MTEB's snippet needs
the hub; its adapter is tested in tests/interop/test_mteb.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from fakes import isolated_eval_cache  # noqa: F401 (autouse fixture)

import embedlab
from embedlab.cli.app import main

README = Path(embedlab.__file__).resolve().parent.parent / "README.md"


def section_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using embedlab with other tools", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def block_with(marker: str) -> str:
    (block,) = [block for block in section_blocks("python") if marker in block]
    return block


def test_the_section_has_the_four_tools():
    blocks = section_blocks("python")
    assert len(blocks) == 4
    for marker in ("model.similarity(", "MTEBEncoder", "faiss.IndexFlatIP", "make_pipeline("):
        assert any(marker in block for block in blocks)


@pytest.mark.crosspath
def test_sentence_transformers_snippet_matches_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    from embedlab.models.loading import resolve_model_path

    names: dict = {}
    exec(block_with("model.similarity("), names)
    reference = SentenceTransformer(str(resolve_model_path("minilm")), device="cpu")
    expected = reference.encode(names["sentences"], normalize_embeddings=True)
    np.testing.assert_allclose(names["embeddings"], expected, atol=1e-5)
    np.testing.assert_allclose(names["similarities"].numpy(), reference.similarity(expected, expected).numpy(), atol=1e-5)


def test_faiss_snippet_finds_the_cosine_nearest_texts(tmp_path, monkeypatch, sts_test_rows):
    faiss = pytest.importorskip("faiss")  # in the test extra
    monkeypatch.chdir(tmp_path)
    texts = list(dict.fromkeys(text for _, a, b in sts_test_rows[:60] for text in (a, b)))
    Path("texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    (commands,) = section_blocks("bash")
    for line in commands.strip().splitlines():
        arguments = shlex.split(line)
        assert arguments[0] == "embedlab" and main(arguments[1:] + ["--quiet"]) == 0
    names: dict = {}
    exec(block_with("faiss.IndexFlatIP"), names)
    method = embedlab.load("minilm")
    vectors = method.encode(texts)
    cosines = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)) @ method.encode(["Who plays the guitar?"], normalize_embeddings=True)[0]
    expected = np.argsort(-cosines)[:3]
    assert names["rows"][0].tolist() == expected.tolist()
    np.testing.assert_allclose(names["scores"][0], cosines[expected], atol=1e-5)
    assert names["nearest_ids"] == [int(row) + 1 for row in expected]  # ids are line numbers
    assert faiss.IndexFlatIP is type(names["index"])


def test_sklearn_snippet_is_the_hand_built_pipeline():
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from embedlab.data.senteval import trec

    questions = trec("test")
    texts, labels = list(questions.texts[:240]), questions.labels[:240]
    names = {"train_texts": texts[:160], "train_labels": labels[:160], "test_texts": texts[160:], "test_labels": labels[160:]}
    exec(block_with("make_pipeline("), names)
    # by hand: encode, z-score with the training statistics only, unit-normalise, logistic regression
    method = embedlab.load("minilm")
    train, test = method.encode(names["train_texts"]).astype(np.float64), method.encode(names["test_texts"]).astype(np.float64)
    scaler = StandardScaler().fit(train)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    model = LogisticRegression(max_iter=1000).fit(unit(scaler.transform(train)), names["train_labels"])
    expected = model.predict(unit(scaler.transform(test)))
    predicted = names["classifier"].predict(names["test_texts"])
    assert (predicted == expected).mean() >= 0.99  # float32 vs float64 arithmetic may flip a near-tie
    assert names["accuracy"] == pytest.approx((predicted == names["test_labels"]).mean())
    assert 0 < names["accuracy"] <= 1
    assert clone(names["classifier"]).get_params()["postprocessing__chain"] == "zscore+normalize"
