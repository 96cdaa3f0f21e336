"""A spec error never echoes a huge value whole: a 100,000-character option value is cut, with an ellipsis
and its length, so that the one-line error stays readable (it named the value in full before)."""

from __future__ import annotations

import pytest

from embedlab.registry import parse
from embedlab.spec import SpecError, shown

LONG = "x" * 100_000


@pytest.mark.parametrize(("spec", "named"), [
    (f"minilm:pool={LONG}", "option pool="),  # a choice
    (f"random:minilm,seed={LONG}", "option seed="),  # a validated number
    (f"minilm:post={LONG}", "option post="),  # a validator's own message quotes it again
    (f"minilm:{LONG}=1", "unknown option"),  # a key
    (f"minilm:layers", "expected key=value"),  # short: shown whole
    (f"{LONG}:minilm", "unknown family"),
    (f"minilm:pool=mean,{LONG}", "expected key=value"),
])
def test_a_long_value_is_cut_in_spec_errors(spec, named):
    with pytest.raises(SpecError) as error:
        parse(spec)
    message = str(error.value)
    assert named in message
    assert len(message) < 1_000, len(message)
    if LONG in spec:
        assert "…" in message and "100,000 characters" in message


def test_shown_keeps_short_values_and_cuts_long_ones():
    assert shown("mean") == "'mean'"
    cut = shown("ab" * 100)
    assert cut.startswith("'abab") and cut.endswith("…' (200 characters)") and len(cut) < 100
