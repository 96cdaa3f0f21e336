"""The pooled families' option tables read the registries of their stages (aggregations, post-processing steps)."""

from __future__ import annotations

from embedlab.methods.pooled_options import POOL_OPTION, POST_OPTION
from embedlab.pooling.aggregation import AGGREGATIONS
from embedlab.pooling.postprocess import STEP_NAMES


def test_every_registered_aggregation_and_step_is_offered_and_described():
    assert POOL_OPTION.choices == ("mean", "cls", "max", "mask", "mean-no-mask", "last") == tuple(AGGREGATIONS)
    assert [name for name in AGGREGATIONS if name not in POOL_OPTION.help] == []
    assert [name for name in STEP_NAMES if name not in POST_OPTION.help] == []
    assert POST_OPTION.help.startswith("post-processing chain, '+'-joined: zscore, quantile-u, quantile-n, whiten, abtt-D, normalize;")
