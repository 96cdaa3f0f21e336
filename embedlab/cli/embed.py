"""``embedlab embed`` (texts → vectors) and ``embedlab similarity`` (two texts → one score).

``embed`` writes either exactly one file (``--output x.npy`` or ``x.parquet``: the whole input encoded in
one call, in memory) or, for any other path, a resumable folder of Parquet shards plus a manifest
(:mod:`embedlab.engines`): the way to embed a real corpus, on this machine or on Ray (``--engine ray``).
Any method spec works with ``similarity``; pairwise methods (``match:…``) have no vectors, so ``embed``
reports that they cannot be embedded.
"""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path

import numpy as np

from embedlab.cli.arguments import add_out, add_quiet, positive_int
from embedlab.data import unicode_problem
from embedlab.data.corpus import FORMATS, Corpus
from embedlab.engines.parquet_vectors import VECTOR_DTYPES, shard_bytes
from embedlab.engines.shards import DEFAULT_SHARD_SIZE, ENGINES
from embedlab.runtime.outputs import check_output_file, same_path
from embedlab.runtime.progress import show_progress, status
from embedlab.errors import InputError  # a command-line choice that cannot work (output path, option combination)
from embedlab.runtime.cache.atomic import atomic_write_bytes

OUTPUT_FORMATS = (".npy", ".parquet")
# Suffixes of file formats embed does not write: `--out vectors.npz` is a mistake, not a folder's name.
OTHER_FILE_FORMATS = frozenset({".npz", ".np", ".csv", ".tsv", ".txt", ".json", ".jsonl", ".pt", ".pth", ".h5", ".hdf5",
                                ".pkl", ".pickle", ".bin", ".safetensors", ".arrow", ".feather", ".parq", ".pq", ".vec"})


def output_kind(output: Path) -> str:
    """The README's rule: ``.npy`` or ``.parquet`` (any case) is one file; any other path a folder of shards
    (``vectors``, ``vectors.2024-06``), except a suffix naming another file format, which is refused."""
    suffix = output.suffix.lower()
    if suffix in OUTPUT_FORMATS and not output.is_dir():
        return suffix
    if suffix in OTHER_FILE_FORMATS and not output.is_dir():
        raise InputError(f"--out {output}: {output.suffix!r} is not a format embed writes; give a .npy (vectors) or "
                         ".parquet (id, vector, optional text) file, in any case, or a folder for resumable shards "
                         "(a path without such a suffix, e.g. vectors or vectors.2024-06)")
    return "folder"


def _refuse_empty(source: str) -> None:
    raise InputError(f"input {source} holds no texts; nothing was written")


def check_output(output: Path) -> None:
    """Fail before any encoding if ``output`` cannot be written: wrong suffix, not a regular file, no
    pyarrow for .parquet, or a folder that cannot be created or written to."""
    if output.exists() and not output.is_file():
        raise InputError(f"--output {output} exists and is not a regular file")
    if output.suffix.lower() not in OUTPUT_FORMATS:
        raise InputError(f"--output {output} must end in .npy (vectors) or .parquet (id, vector, optional text), "
                         "or name a folder (no suffix) for resumable shards")
    if output.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("writing .parquet needs pyarrow (pip install pyarrow), or write .npy") from None
    check_output_file(output, option="--out")  # names --out, not a probe file, on a read-only file system
    output.parent.mkdir(parents=True, exist_ok=True)


def _cmd_embed(args: argparse.Namespace) -> int:
    if args.out is None:  # not argparse's required=: the hidden --output alias must satisfy it too
        raise InputError("the following arguments are required: --out")
    if args.out == "-":
        raise InputError("--out -: vectors are not written to standard output; give a .npy or .parquet file, or a folder")
    output = Path(args.out)
    kind = output_kind(output)
    if args.input != "-" and _is_null_device(args.input):
        _refuse_empty(args.input)  # a folder run would call it a device: the same answer for both outputs
    if kind == "folder":
        return _embed_to_folder(args, output)
    if args.engine != "local" or args.address or args.workers:
        raise InputError(f"--engine ray writes a folder of shards; give --out a folder, not the file {output}")
    import embedlab

    check_output(output)
    if args.input != "-" and same_path(output, Path(args.input).expanduser()):
        raise InputError(f"--out {output} is the input file: writing the vectors there would replace the texts; "
                         "give another path (nothing was written)")
    if args.include_text and kind != ".parquet":
        raise InputError("--include-text needs a .parquet output (a .npy file holds only the vectors)")
    corpus = Corpus(args.input, args.input_format)
    ids, texts = corpus.read_all()
    if not texts:
        _refuse_empty(corpus.source)
    method = embedlab.load(args.spec)
    vectors = method.encode(texts, batch_size=args.batch_size, show_progress_bar=show_progress(), normalize_embeddings=args.normalize)
    # FAISS-ready rows, in the spec's precision: int8/uint8 (precision=int8, ubinary, …) stay integers
    vectors = np.ascontiguousarray(vectors, dtype=vectors.dtype if vectors.dtype in (np.int8, np.uint8) else np.float32)
    if kind == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        payload = buffer.getbuffer()
    else:
        payload = shard_bytes(ids, vectors, texts if args.include_text else None)
    try:
        atomic_write_bytes(output, [payload])
    except OSError as error:
        raise OSError(error.errno, f"could not write the output ({error.strerror}); nothing was written", str(output)) from None
    status(f"wrote {describe_vectors(vectors.shape[0], vectors.shape[1], vectors.dtype, method.output_options()[0])} to {output}")
    return 0


def describe_vectors(rows: int, width: int, dtype: object, precision: str) -> str:
    """``"3 x 48 uint8 vectors (precision=ubinary: 384 bits, 8 to a byte)"``: what was written, as stored."""
    packed = f" (precision={precision}: {width * 8} bits, 8 to a byte)" if precision in ("binary", "ubinary") else ""
    return f"{rows} x {width} {np.dtype(dtype).name} vectors{packed}"


def _is_null_device(name: str) -> bool:
    try:
        return os.path.samefile(Path(name).expanduser(), os.devnull)
    except OSError:
        return False  # missing or unreadable: the reader names it


def _embed_to_folder(args: argparse.Namespace, folder: Path) -> int:
    if args.include_text:
        raise InputError("--include-text needs a .parquet --out file; a shard folder holds ids and vectors")
    if args.engine != "ray" and (args.address or args.workers):
        raise InputError("--address and --workers are options of --engine ray")
    from embedlab.engines.runner import embed_corpus  # the models (torch) load only when a run needs them

    result = embed_corpus(
        args.spec, args.input, folder, engine=args.engine, input_format=args.input_format, shard_size=args.shard_size,
        batch_size=args.batch_size, normalize=args.normalize, overwrite=args.overwrite, progress=show_progress(),
        address=args.address, workers=args.workers,
    )
    reused = f", {result.shards_reused} finished shard(s) kept" if result.shards_reused else ""
    status(f"{describe_vectors(result.texts, result.width, VECTOR_DTYPES[result.precision], result.precision)} in {result.folder} "
           f"({result.shards_written} shard(s) written{reused})")
    return 0


def _cmd_similarity(args: argparse.Namespace) -> int:
    import embedlab

    for name, text in (("text_a", args.text_a), ("text_b", args.text_b)):
        problem = unicode_problem(text)  # undecodable bytes in an argument arrive as lone surrogates
        if problem:
            raise InputError(f"{name} has a {problem}")
    score = embedlab.load(args.spec).similarity_pairs([(args.text_a, args.text_b)])[0]
    print(f"{score:.6f}")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``embed`` and ``similarity``."""
    embed = subparsers.add_parser("embed", help="embed texts into a .npy/.parquet file or a resumable folder of shards")
    embed.add_argument("spec", help="method spec, e.g. minilm or minilm:layers=1+last,post=quantile-u")
    embed.add_argument("--input", required=True,
                       help="texts: .txt (one per line), .jsonl ('text', optional 'id'), .csv/.tsv (header with 'text', optional 'id'), "
                       ".parquet (columns text, optional id), or - for stdin (file outputs only)")
    embed.add_argument("--input-format", choices=("auto", *FORMATS), default="auto",
                       help="auto: by suffix (.jsonl/.json, .csv, .tsv, .parquet; anything else is one text per line)")
    add_out(
        embed, "--output",
        help="a .npy (float32 rows) or .parquet (id, vector, text with --include-text) file (any case), written atomically; "
        "another file format's suffix (.npz, .csv, ...) is refused; any other path is a folder of Parquet shards + manifest.json that a rerun resumes (ids: the file's 'id', else line/row numbers)",
    )
    embed.add_argument("--include-text", action="store_true", help=".parquet file only: add a 'text' column")
    embed.add_argument("--batch-size", type=positive_int, default=32)
    embed.add_argument("--normalize", action="store_true", help="unit-normalise the vectors")
    add_quiet(embed)
    folder = embed.add_argument_group("shard folders (--out FOLDER)")
    folder.add_argument("--engine", choices=ENGINES, default="local", help="local: this process; ray: Ray Data actors (pip install 'embedlab[ray]')")
    folder.add_argument("--address", default=None, help="Ray cluster to attach to (default $RAY_ADDRESS; neither: start a local Ray)")
    folder.add_argument("--workers", type=positive_int, default=None, help="Ray actors (default: one per CPU of the cluster)")
    folder.add_argument("--shard-size", type=positive_int, default=DEFAULT_SHARD_SIZE, help=f"texts per shard (default {DEFAULT_SHARD_SIZE:,})")
    folder.add_argument("--overwrite", action="store_true", help="replace another run's shards in --out instead of refusing")
    embed.set_defaults(handler=_cmd_embed)

    similarity = subparsers.add_parser("similarity", help="print the similarity (cosine for vector methods) of two texts")
    similarity.add_argument("spec")
    similarity.add_argument("text_a")
    similarity.add_argument("text_b")
    similarity.set_defaults(handler=_cmd_similarity)
