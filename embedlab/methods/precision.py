"""Precision options of methods: the compute a transformer runs in, and the output vectors' precision and width.

Two independent choices, each a spec option and (for the output) an ``encode`` argument:

* **compute** — ``dtype=fp32|bf16|fp16|auto`` and ``quantize=none|int8`` on every family that runs a
  transformer forward (:mod:`embedlab.models.precision` loads the model so and puts the resolved compute
  in its fingerprint). Static families (``random``, ``static``) have no forward and no such options.
* **output** — ``precision=float32|int8|uint8|binary|ubinary`` and ``truncate_dim=N`` on every vector
  family, as sentence-transformers' ``encode(precision=, truncate_dim=)``: the first N dimensions are kept,
  then the vectors are normalised if asked, then quantised by sentence-transformers' own
  ``quantize_embeddings`` (so the bytes are equal to its, calibration ranges included: int8/uint8 ranges
  are each dimension's min and max over the texts of one ``encode`` call, or ranges fitted once and passed
  in, as ``embed --out`` does over a whole corpus).
"""

from __future__ import annotations

import logging

import numpy as np

from embedlab.errors import InputError
from embedlab.models.loading import default_device, model_traits
from embedlab.models.compute_choice import resolve_compute
from embedlab.spec import MethodSpec, Option, SpecError, whole_number

DTYPE_OPTION = Option("fp32", ("fp32", "bf16", "fp16", "auto"),
                      "compute dtype of the transformer: fp32 (exact), bf16, fp16, auto (the fastest native compute within the "
                      "quality budget, measured once per machine; never slower than fp32); enters the fingerprint")
QUANTIZE_OPTION = Option("none", ("none", "int8"), "int8: dynamic int8 linear layers (torch, CPU); not with dtype")
COMPUTE_OPTIONS = {"dtype": DTYPE_OPTION, "quantize": QUANTIZE_OPTION}

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
BINARY_PRECISIONS = ("binary", "ubinary")
SCALAR_PRECISIONS = ("int8", "uint8")


def _validate_truncate_dim(value: str) -> str:
    return value if value == "none" else whole_number(1)(value)


PRECISION_OPTION = Option("float32", PRECISIONS, "output vectors as sentence-transformers' quantize_embeddings: float32, int8/uint8 "
                          "(per-dimension ranges of the encoded texts), binary/ubinary (sign bits packed 8 to a byte)")
TRUNCATE_DIM_OPTION = Option("none", help="keep the first N dimensions of each vector (before normalising and quantising); "
                             "none keeps all", validate=_validate_truncate_dim)
OUTPUT_OPTIONS = {"precision": PRECISION_OPTION, "truncate_dim": TRUNCATE_DIM_OPTION}


def _option(spec: MethodSpec, key: str, default: str) -> str:
    schema = spec.schema
    return spec.get(key) if schema is not None and key in schema.options else default


def compute_of(spec: MethodSpec) -> str:
    """The compute ``spec`` asks for, resolved on this machine (``auto`` → the measured choice, :mod:`embedlab.models.compute_choice`); fp32 for a family
    without compute options. ``dtype`` with ``quantize=int8`` is refused: they are two ways to choose one."""
    dtype, quantize = _option(spec, "dtype", "fp32"), _option(spec, "quantize", "none")
    if quantize != "none" and dtype != "fp32":
        raise SpecError(f"{spec}: dtype={dtype} with quantize={quantize}: choose one (int8 quantises the fp32 model's linear layers)")
    traits = model_traits(spec.model) if dtype == "auto" and spec.model else None  # auto measures the model's own width
    width = traits.width if traits is not None else None
    return resolve_compute(dtype, quantize, default_device(), width)


def output_options(spec: MethodSpec, precision: str | None = None, truncate_dim: int | None = None) -> tuple[str, int | None]:
    """The output precision and width of one encode: the arguments where given, else the spec's options."""
    if precision is None:
        precision = _option(spec, "precision", "float32")
    if truncate_dim is None:
        spec_dim = _option(spec, "truncate_dim", "none")
        truncate_dim = None if spec_dim == "none" else int(spec_dim)
    return precision, truncate_dim


def check_output(where: str, precision: str, truncate_dim: object, width: int | None) -> None:
    """Refuse, before any work, an output the vectors cannot have: an unknown precision, a width that is
    not a whole number from 1 to the vectors' ``width``, binary bits that do not fill whole bytes."""
    if precision not in PRECISIONS:
        raise InputError(f"{where}: precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if truncate_dim is not None:
        if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, (int, np.integer)) or truncate_dim < 1:
            raise InputError(f"{where}: truncate_dim must be a positive whole number, got {str(truncate_dim)[:40]}")
        if width is not None and truncate_dim > width:
            raise InputError(f"{where}: truncate_dim={truncate_dim} is larger than the vectors' width {width}")
    bits = truncate_dim if truncate_dim is not None else width
    if precision in BINARY_PRECISIONS and bits is not None and bits % 8:
        raise InputError(f"{where}: precision={precision} packs 8 dimensions to a byte, and {bits} is not a multiple of 8; "
                         "use a truncate_dim that is")


def int8_ranges(vectors: np.ndarray) -> np.ndarray:
    """Each dimension's (min, max) over ``vectors``, shape (2, d): the calibration sentence-transformers'
    ``quantize_embeddings`` computes from the vectors it is given."""
    return np.vstack((vectors.min(axis=0), vectors.max(axis=0))).astype(np.float32)


def quantized(vectors: np.ndarray, precision: str, ranges: np.ndarray | None = None, where: str = "encode") -> np.ndarray:
    """``vectors`` in ``precision`` by sentence-transformers' ``quantize_embeddings`` (float32 unchanged)."""
    if precision == "float32":
        return vectors
    if precision in SCALAR_PRECISIONS and ranges is None and len(vectors) == 1:
        raise InputError(f"{where}: precision={precision} takes its ranges from the encoded texts, and one text has none; "
                         "encode several texts together, or embed a corpus with --out (ranges fitted once)")
    from sentence_transformers import quantize_embeddings

    logger = logging.getLogger(quantize_embeddings.__module__)
    if not any(isinstance(existing, _BucketNotice) for existing in logger.filters):
        logger.addFilter(_BucketNotice())
    return quantize_embeddings(vectors, precision=precision, ranges=ranges)


class _BucketNotice(logging.Filter):
    """Drops sentence-transformers' "Computing int8 quantization buckets based on N embeddings" warning, printed
    on every int8/uint8 call of fewer than 100 vectors: embedlab documents where its ranges come from (the
    call's vectors, or a folder's whole input), so the line only repeats itself (docs/precision.md)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "quantization buckets" not in record.getMessage()


def comparable(vectors: np.ndarray, precision: str) -> np.ndarray:
    """Float32 rows whose cosines compare the vectors as their precision means them: binary bits as ±1 (the
    cosine is then 1 − 2·Hamming/d, ordered as Hamming distance), int8/uint8 and float32 as their values."""
    if precision not in BINARY_PRECISIONS:
        return np.asarray(vectors, dtype=np.float32)
    as_bytes = np.asarray(vectors).view(np.uint8) if precision == "ubinary" else (np.asarray(vectors, dtype=np.int16) + 128).astype(np.uint8)
    return np.unpackbits(as_bytes, axis=-1).astype(np.float32) * 2 - 1

