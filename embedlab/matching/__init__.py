"""The token-level matching paper's method (*Token-level matching for STS*): pairwise, explainable similarity."""
