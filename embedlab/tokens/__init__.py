"""Stage 1 of the data flow: texts → all-layer token states (prompt templates applied, long texts chunked), cached."""
