"""Every evaluation test writes encodings, margins and results to a per-session temporary folder."""

from fakes import isolated_eval_cache  # noqa: F401 (autouse fixture)
