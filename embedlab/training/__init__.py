"""Training that ships resources: the MiniLM masked-LM head and the SimCSE-learned token weights."""
