"""``embedlab cache info`` and ``embedlab cache clear`` over a real cache written by the real model."""

import numpy as np
import pytest

from embedlab.cli.app import main
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.budget import cache_size
from embedlab.tokens.store import TokenStateStore


@pytest.fixture
def filled_cache(isolated_cache, minilm, sts_sentences):
    """Token states of 3 texts (last layer), one eval entry, and a file that is not recomputable."""
    TokenStateStore(minilm).compute(sts_sentences[:3], layers=(minilm.num_layers,))
    ArrayStore("eval").save("entry", np.zeros(1000, dtype=np.float32))
    trained = isolated_cache / "token_weights" / "weights.safetensors"
    trained.parent.mkdir()
    trained.write_bytes(b"\0" * 100)
    return isolated_cache


def test_info_shows_location_budget_and_each_kind(filled_cache, capsys, monkeypatch):
    monkeypatch.setenv("EMBEDLAB_CACHE_MAX", "500M")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"location: {filled_cache}" in out and "budget:   500.0 MiB" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[6:] if line.strip()}
    assert rows["token_states"][3:] == ["1", "3", "yes"]  # one pack, three entries (3 texts × 1 layer)
    assert rows["eval"][3:] == ["1", "1", "yes"]
    assert rows["token_weights"][3:] == ["0", "0", "no", "(kept)"]
    assert f"({100 * cache_size() / (500 << 20):.0f}% of the budget)" in out


def test_clear_one_kind_then_everything_recomputable(filled_cache, capsys):
    assert main(["cache", "clear", "--kind", "eval"]) == 0
    assert "(eval)" in capsys.readouterr().out
    assert not list((filled_cache / "eval").glob("*.safetensors")) and list(filled_cache.rglob("*.pack"))
    assert main(["cache", "clear"]) == 0
    assert "kept (not recomputable): token_weights" in capsys.readouterr().out
    assert not list(filled_cache.rglob("*.pack")) and (filled_cache / "token_weights" / "weights.safetensors").exists()


@pytest.mark.parametrize("kind, message", [("nothing", "no cache kind 'nothing'"), ("token_weights", "cannot be recomputed")])
def test_clear_refuses_unknown_and_kept_kinds(kind, message, filled_cache, capsys):
    assert main(["cache", "clear", "--kind", kind]) == 2
    assert message in capsys.readouterr().err
    assert (filled_cache / "token_weights" / "weights.safetensors").exists()


def test_a_bad_budget_is_one_line_naming_the_variable(isolated_cache, capsys, monkeypatch):
    monkeypatch.setenv("EMBEDLAB_CACHE_MAX", "two gigs")
    assert main(["cache", "info"]) == 2
    assert capsys.readouterr().err.strip() == (
        "embedlab cache: error: EMBEDLAB_CACHE_MAX='two gigs' is not a size: give bytes or a number with K, M, G or T (e.g. 500M, 2G)")
