"""Token-level matching similarity (Wang & Yu 2023): ``scoring`` (Eq. 1–2, pure numpy), ``method``
(the pairwise ``match:`` family and its learned token weights), ``explain`` (Fig. 2 tables and heatmaps)."""
