"""Embedding methods: the shared interface, the family registry, and the pooled / static / st / concat families."""
