"""The neural-embeddings paper's method (*Neural Embeddings for Text*): micro-tune a masked-LM head on one text."""
