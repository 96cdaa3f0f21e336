import pytest


from embedlab.registry import parse as parse_spec
from embedlab.spec import ConcatSpec, MethodSpec, SpecError


@pytest.mark.parametrize(
    "text",
    [
        "minilm",
        "minilm:layers=1+last,weights=idf-ref,filter=biases,post=quantile-u",
        "minilm:pool=mask,template=T4",
        "random:minilm",
        "avg:minilm,layers=1",
        "bert+avg:minilm,w=-0.25",
        "st:minilm",
        "minilm:post=zscore+whiten@ref+normalize",
        "st:minilm+minilm:layers=1+last",
        "minilm:post=normalize,truncate=256",
        "bert+avg:minilm,truncate=128",
    ],
)
def test_canonical_specs_round_trip(text):
    assert str(parse_spec(text)) == text
    assert str(parse_spec(str(parse_spec(text)))) == text


def test_defaults_are_dropped_and_options_ordered():
    spec = parse_spec("minilm:post=none,template=T0,layers=last,pool=mask")
    assert str(spec) == "minilm:pool=mask,template=T0"
    assert spec.get("layers") == "last" and spec.get("weights") == "none"


def test_values_are_canonicalised():
    assert str(parse_spec("minilm:layers=last+1+1")) == "minilm:layers=1+last"
    assert str(parse_spec("minilm:filter=subword+punct+frequent")) == "minilm:filter=biases"
    assert str(parse_spec("minilm:filter=subword+punct")) == "minilm:filter=punct+subword"
    assert str(parse_spec("bert+avg:minilm,w=.5")) == "bert+avg:minilm"
    assert str(parse_spec("minilm:truncate=none")) == "minilm"  # the default: long texts are chunked, not cut
    assert str(parse_spec("minilm:truncate=0256")) == "minilm:truncate=256"
    assert parse_spec("bert+avg:minilm,w=-1").get("w") == "-1.0"


def test_family_and_model_are_parsed():
    spec = parse_spec("bert+avg:minilm,layers=1")
    assert isinstance(spec, MethodSpec) and spec.family == "bert+avg" and spec.model == "minilm"
    assert parse_spec("minilm").family == "pooled"
    assert parse_spec("/models/bert-base-uncased:layers=1").model == "/models/bert-base-uncased"


def test_concatenation_splits_only_between_methods():
    spec = parse_spec("neural_like:minilm+minilm".replace("neural_like", "st"))
    assert isinstance(spec, ConcatSpec) and [str(part) for part in spec.parts] == ["st:minilm", "minilm"]
    spec = parse_spec("minilm:layers=1+2+last,post=zscore+normalize+random:minilm,seed=3")
    assert [str(part) for part in spec.parts] == ["minilm:layers=1+2+last,post=zscore+normalize", "random:minilm,seed=3"]
    assert isinstance(parse_spec("bert+avg:minilm"), MethodSpec)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("minilm:foo=1", "valid options: layers, pool"),
        ("minilm:pool=median", "choose one of: mean, cls, max, mask, mean-no-mask"),
        ("minilm:layers=-2", "lowest layer is -1"),
        ("minilm:post=zscore@wiki", "'@ref'"),
        ("minilm:post=abtt-0", "unknown post-processing step"),
        ("minilm:filter=stop", "biases"),
        ("minilm:truncate=0", "truncate='0': must be at least 1"),
        ("minilm:truncate=first", "truncate='first': must be a whole number"),
        ("random:minilm,truncate=256", "valid options"),
        ("random:minilm,layers=1", "valid options"),
        ("minilm:pool", "expected key=value"),
        ("minilm:pool=mean,pool=max", "given twice"),
        ("", "empty"),
        ("minilm :pool=max", "whitespace"),
    ],
)
def test_bad_specs_name_the_problem(text, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_spec(text)
