import pytest

import embedlab
from embedlab.methods.concat import ConcatMethod
from embedlab.methods.pooled import PooledMethod
from embedlab.methods.st import SentenceTransformerMethod
from embedlab.models.named import NAMED_MODELS, ModelNotFoundError
from embedlab.registry import FAMILIES, PRESETS, load, parse


def test_every_family_is_registered_once():
    assert list(FAMILIES) == ["pooled", "random", "avg", "bert+avg", "distil", "static", "st", "neural", "match"]
    assert all(name == family.name for name, family in FAMILIES.items())


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_load_by_name(name):
    spec, _ = PRESETS[name]
    method = embedlab.load(name)
    assert method.spec == str(parse(spec)) == str(parse(name))


def test_preset_names_are_not_model_names():
    assert not set(PRESETS) & set(NAMED_MODELS)


def test_load_builds_the_family_class():
    assert type(load("minilm")) is PooledMethod and type(load("avg:minilm")) is PooledMethod
    assert type(load("st:minilm")) is SentenceTransformerMethod
    assert type(load("minilm+st:minilm")) is ConcatMethod


def test_an_unknown_model_fails_in_load_with_the_list_of_named_models():
    with pytest.raises(ModelNotFoundError, match="unknown or unavailable model 'no-such-model'") as error:
        load("no-such-model:layers=1")
    assert "minilm" in str(error.value)
    with pytest.raises(ModelNotFoundError):
        load("minilm+st:no-such-model")
