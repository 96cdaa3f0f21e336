"""embedlab/serve/served.py: names, and fitted statistics set once at start (never on a request's texts)."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.cli.app import main
from embedlab.engines.runner import embed_corpus
from embedlab.errors import InputError
from embedlab.serve.served import find_served, load_served, parse_aliases
from serve_helpers import TEXTS, tiny_model  # noqa: F401 - tiny_model: a fixture
from tolerance import UNIT_ATOL

FIT_TEXTS = ["a man plays guitar", "two dogs run", "share prices dropped steeply", "she cut a tomato", "the crowd cheered",
             "winter comes", "talk about music"]


@pytest.fixture(scope="module")
def target_fitted(tiny_model) -> str:
    return f"{tiny_model}:weights=idf-target,post=zscore"  # both statistics depend on the texts fitted on


@pytest.fixture(scope="module")
def fit_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fit") / "texts.txt"
    path.write_text("\n".join(FIT_TEXTS) + "\n")
    return str(path)


def test_a_target_fitted_spec_is_refused_without_statistics_and_the_command_says_what_to_do(target_fitted, capsys) -> None:
    with pytest.raises(InputError, match="--fit-on FILE.*--fitted FOLDER"):
        load_served([target_fitted])
    assert main(["serve", target_fitted, "--port", "0"]) == 2  # refused before any socket is opened
    assert "--fit-on FILE" in capsys.readouterr().err


@pytest.mark.crosspath
def test_fit_on_and_fitted_folder_give_the_vectors_of_a_method_fitted_on_those_texts(target_fitted, fit_file, tmp_path) -> None:
    expected = embedlab.load(target_fitted).fit(FIT_TEXTS).encode(TEXTS)
    fitted_on = find_served(load_served([target_fitted], fit_on=fit_file), target_fitted).method
    # fitted on the file's texts as read by the server vs fitted in-process: the same statistics up to float32 rounding
    np.testing.assert_allclose(fitted_on.encode(TEXTS), expected, rtol=0, atol=UNIT_ATOL)
    np.testing.assert_allclose(fitted_on.encode(TEXTS[:1]), expected[:1], rtol=0, atol=UNIT_ATOL)  # one text: the same vector, another batch

    embed_corpus(target_fitted, fit_file, tmp_path / "vectors", progress=False)  # what `embed --out FOLDER` stores
    restored = find_served(load_served([target_fitted], fitted=[str(tmp_path / "vectors")]), target_fitted).method
    np.testing.assert_allclose(restored.encode(TEXTS), expected, rtol=0, atol=UNIT_ATOL)  # fitted by embed_corpus in its own batches
    with pytest.raises(InputError, match="not a shard folder of a served spec"):
        load_served([str(target_fitted).replace("post=zscore", "post=whiten")], fitted=[str(tmp_path / "vectors")])


def test_a_spec_is_reached_as_typed_canonical_or_by_alias(tiny_model) -> None:
    typed = f"{tiny_model}:pool=mean"  # the default pool: its canonical form drops it
    served = load_served([typed], {"small": typed})
    canonical = embedlab.load(typed).spec
    assert canonical != typed and set(served) == {typed, canonical, "small"}
    assert served[typed] is served[canonical] is served["small"] and served["small"].names == [typed, canonical, "small"]
    assert served["small"].count_tokens(["a man", "two dogs run"]) == [4, 5]  # [CLS] words [SEP]
    with pytest.raises(InputError, match="not served here"):
        find_served(served, "other")
    with pytest.raises(InputError, match="ALIAS=SPEC"):
        parse_aliases(["small"])
    with pytest.raises(InputError, match="given twice"):
        parse_aliases(["a=minilm", "a=st:minilm"])


def test_int8_output_is_refused_at_start_since_its_ranges_would_come_from_other_requests(tiny_model) -> None:
    for precision in ("int8", "uint8"):
        with pytest.raises(InputError, match=f"precision={precision} fits its ranges on the texts of each encode call"):
            load_served([f"{tiny_model}:precision={precision}"])
    assert load_served([f"{tiny_model}:precision=binary"])  # bits need no ranges: one text's bits are its own


def test_fit_on_with_nothing_to_fit_is_refused(tiny_model, fit_file) -> None:
    with pytest.raises(InputError, match="--fit-on .*nothing to fit"):
        load_served([str(tiny_model), f"{tiny_model}:post=whiten@ref"], fit_on=fit_file)
