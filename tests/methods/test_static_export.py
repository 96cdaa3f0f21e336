"""export-static: an avg:/random:/distil: method as a model2vec folder; model2vec's vectors equal embedlab's."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.cli.app import main
from embedlab.methods.static_export import NotExportableError, export_static, plan_export
from tolerance import UNIT_ATOL, scaled_atol

model2vec = pytest.importorskip("model2vec")


@pytest.fixture
def tiny_avg_tables(minilm, monkeypatch):
    from embedlab.pooling import sources

    tables = np.random.default_rng(1).normal(size=(minilm.num_layers + 2, len(minilm.tokenizer), 12)).astype(np.float32)
    monkeypatch.setattr(sources, "avg_tables", lambda model, show_progress_bar=None: tables)
    return tables


@pytest.mark.parametrize("spec", [
    "random:minilm,special=exclude",
    "random:minilm,special=exclude,dim=20,post=zscore+normalize",
    "random:minilm,special=exclude,post=whiten",
    "random:minilm,special=exclude,post=abtt-2",
    "random:minilm,special=exclude,weights=idf-target,filter=punct,post=normalize",
    "random:minilm,special=exclude,weights=idf-ref,post=normalize",
    "avg:minilm,layers=1+last,special=exclude,post=zscore",
])
@pytest.mark.crosspath
def test_round_trip_model2vec_loads_the_folder_and_gives_embedlabs_vectors(tmp_path, sts_test_rows, tiny_avg_tables, spec):
    texts = list(dict.fromkeys(text for _, a, b in sts_test_rows[:150] for text in (a, b)))
    texts.append(" ".join(texts[:40]))  # > 128 tokens: MiniLM's tokenizer.json truncates there, the export must not
    method = embedlab.load(spec).fit(texts)
    export_static(method, tmp_path / "model")
    theirs = model2vec.StaticModel.from_pretrained(str(tmp_path / "model")).encode(texts)
    ours = method.encode(texts)
    assert theirs.shape == ours.shape
    # model2vec's mean of the exported rows vs embedlab's pipeline: float32 rounding, at the vectors' scale
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=scaled_atol(ours))
    # and embedlab reads its own export back through the static family
    np.testing.assert_allclose(embedlab.load(f"static:{tmp_path / 'model'}").encode(texts), ours, rtol=0, atol=scaled_atol(ours))


@pytest.mark.crosspath
def test_reference_fitted_steps_need_no_target_texts(tmp_path, sts_sentences, monkeypatch):
    """whiten@ref is fitted on WikiText-2 sentences: here a stand-in reference sample keeps the test small."""
    from embedlab.methods.pooled import PooledMethod

    reference = np.random.default_rng(2).normal(size=(500, 384)).astype(np.float32)
    monkeypatch.setattr(PooledMethod, "reference_vectors", lambda self, idf, *args, **kwargs: reference)
    method = embedlab.load("random:minilm,special=exclude,post=whiten@ref+normalize")
    export_static(method, tmp_path / "model")
    theirs = model2vec.StaticModel.from_pretrained(str(tmp_path / "model")).encode(sts_sentences)
    np.testing.assert_allclose(theirs, method.encode(sts_sentences), rtol=0, atol=UNIT_ATOL)  # unit vectors, float32 rounding


@pytest.mark.parametrize("spec, reason", [
    ("minilm", "depend on the context"),
    ("st:minilm", "depend on the context"),
    ("neural:minilm", "depend on the context"),
    ("bert+avg:minilm", "only the w·Avg part is static"),
    ("random:minilm", r"includes \[CLS\]/\[SEP\].*export random:minilm,special=exclude instead"),
    ("random:minilm,special=exclude,pool=max", "pool=max cannot be folded"),
    ("random:minilm,special=exclude,post=quantile-u", "quantile-u is not affine"),
    ("random:minilm,special=exclude,post=normalize+zscore", "normalize before other"),
    ("random:minilm,special=exclude,weights=idf-ref", "exactly 'normalize'.*post=normalize instead"),
    ("random:minilm,special=exclude,filter=punct,post=zscore+normalize", "exactly 'normalize'"),
])
def test_what_cannot_be_folded_is_refused_with_the_reason(spec, reason):
    with pytest.raises(NotExportableError, match=reason):
        plan_export(embedlab.load(spec))


@pytest.mark.crosspath
def test_cli_exports_and_refuses_before_work(tmp_path, capsys, sts_sentences):
    out = tmp_path / "model"
    assert main(["export-static", "minilm", "--out", str(out)]) == 2
    assert "cannot be exported as a static model" in capsys.readouterr().err and not out.exists()
    assert main(["export-static", "random:minilm,special=exclude,post=zscore", "--out", str(out)]) == 2
    assert "--fit-on FILE" in capsys.readouterr().err and not out.exists()
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(sts_sentences) + "\n")
    assert main(["export-static", "random:minilm,special=exclude,post=zscore", "--out", str(out), "--fit-on", str(texts)]) == 0
    assert "as a model2vec model" in capsys.readouterr().out
    method = embedlab.load("random:minilm,special=exclude,post=zscore").fit(sts_sentences)
    theirs = model2vec.StaticModel.from_pretrained(str(out)).encode(sts_sentences)
    ours = method.encode(sts_sentences)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=scaled_atol(ours))  # z-scores (not unit scale): float32 rounding at their scale
    assert main(["export-static", "random:minilm,special=exclude", "--out", str(out)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
