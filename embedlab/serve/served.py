"""The methods a server serves: loaded and fitted once at start, found by the names a request may use.

A request's ``model`` names a served method by the spec as typed on the command line, its canonical
form, or an alias (``--name ALIAS=SPEC``). Statistics are fitted before the first request, never on a
request's own texts: a spec that fits on its target texts (``weights=idf-target``, a ``post=`` step
without ``@ref``) would otherwise give a text a different vector in every batch it lands in. Such a spec
is fitted on ``--fit-on FILE`` (as ``embed`` fits a shard folder on its corpus) or restored from the
``fitted-*.safetensors`` of an ``embed --out FOLDER`` run (``--fitted FOLDER``); without either it is
refused; ``--fit-on`` when no served spec needs it is refused too. A spec whose statistics do not depend
on the texts is fitted on one text, as the engines do. Output whose int8/uint8 ranges would be fitted on
each batch is refused at start, for the same reason.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from embedlab.data.corpus import Corpus
from embedlab.engines.shards import MANIFEST_NAME, OutputFolder
from embedlab.errors import InputError, UnknownNameError
from embedlab.methods.base import EmbeddingMethod, VectorMethod
from embedlab.methods.precision import SCALAR_PRECISIONS
from embedlab.models.loading import load_model
from embedlab.registry import load
from embedlab.runtime.cache.hashing import file_sha256

# One text to fit a spec on whose statistics do not depend on the texts (its state is the same for any).
NEUTRAL_FIT_TEXT = "A text to fit statistics that do not depend on the texts."


@dataclass
class ServedMethod:
    """One served method: the names that reach it, the method, and a tokenizer of its own for counting
    tokens (a copy: the encoding thread reconfigures the method's tokenizer while it runs)."""

    spec: str
    method: EmbeddingMethod
    counting_tokenizer: object
    names: list[str] = field(default_factory=list)
    max_input_tokens: int | None = None  # the model's own window (a longer text is pooled over chunks, not refused)

    @property
    def vectors(self) -> bool:
        """Whether the method embeds texts into vectors (``match:`` methods only score pairs)."""
        return isinstance(self.method, VectorMethod) and not self.method.pairwise

    @property
    def dimension(self) -> int | None:
        return self.method.dimension if self.vectors else None

    @property
    def unit_vectors(self) -> bool:
        """Whether the method's float vectors have unit length by its spec (``VectorMethod.unit_vectors``)."""
        return self.vectors and self.method.output_precision == "float32" and self.method.unit_vectors

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, the special tokens the tokenizer adds included (``usage.prompt_tokens``)."""
        if not texts:
            return []
        return [len(ids) for ids in self.counting_tokenizer(list(texts), add_special_tokens=True)["input_ids"]]


def parse_aliases(pairs: Sequence[str]) -> dict[str, str]:
    """``--name ALIAS=SPEC`` options → {alias: spec}; a malformed or repeated alias is refused."""
    aliases: dict[str, str] = {}
    for pair in pairs:
        alias, separator, spec = pair.partition("=")
        if not separator or not alias.strip() or not spec.strip():
            raise InputError(f"--name {pair!r}: give ALIAS=SPEC, e.g. --name small=minilm")
        if alias in aliases:
            raise InputError(f"--name {alias}: the alias is given twice")
        aliases[alias] = spec
    return aliases


def _tokenizer_of(method: EmbeddingMethod) -> tuple[object, int | None]:
    """The tokenizer of the method's (first part's) model, copied for the counting thread, and the model's
    own window in tokens (None where the tokenizer names none)."""
    part = getattr(method, "parts", [method])[0]
    model = getattr(part, "model", None)  # pooled and matching methods: the loaded model (or a static folder)
    tokenizer = getattr(model, "tokenizer", None) or load_model(part.parsed.model).tokenizer
    counting = copy.deepcopy(tokenizer)
    window = getattr(counting, "model_max_length", None)
    if window is not None:
        counting.model_max_length = 1 << 62  # counting all of a long text (embedlab splits it), not warning
    return counting, window if isinstance(window, int) and window < 1_000_000 else None  # transformers' "none" is 1e30


def _servable(method: EmbeddingMethod) -> EmbeddingMethod:
    """``method``, unless its vectors could not be served independently of each other: int8/uint8 output
    takes each dimension's range from the texts of one encode call, so a served text's bytes would depend
    on the other requests batched with it (and a one-text request has no ranges at all)."""
    if isinstance(method, VectorMethod) and not method.pairwise and method.output_precision in SCALAR_PRECISIONS:
        raise InputError(f"{method.spec}: precision={method.output_precision} fits its ranges on the texts of each encode call, so a "
                         "served vector would depend on the other requests batched with it. Serve the float32 spec (drop "
                         "precision=) and quantise with ranges fitted once on a corpus (embed --out), or use precision=binary")
    return method


def _fitted_states(folder: Path, spec: str) -> list[bytes]:
    """The fitted states an ``embed --out FOLDER`` run of ``spec`` stored, checked against their sha256."""
    manifest = OutputFolder(folder).read_manifest() if folder.is_dir() else None
    if manifest is None:
        raise InputError(f"--fitted {folder}: not a shard folder of `embed --out FOLDER` (no {MANIFEST_NAME})")
    if manifest.get("spec") != spec:
        raise InputError(f"--fitted {folder}: holds statistics of {manifest.get('spec')!r}, which is not served")
    if not manifest.get("fitted"):
        raise InputError(f"--fitted {folder}: the run stored no fitted statistics (it was killed before fitting)")
    states = []
    for entry in manifest["fitted"]:
        path = folder / entry["file"]
        if not path.is_file() or file_sha256(path) != entry["sha256"]:
            raise InputError(f"--fitted {folder}: {entry['file']} is missing or damaged")
        states.append(path.read_bytes())
    return states


def _fit(method: EmbeddingMethod, fit_texts: list[str] | None, fitted: dict[str, list[bytes]], batch_size: int) -> None:
    """Give every fittable part its state before the first request (see the module docstring)."""
    if not method.fittable:
        return
    if method.spec in fitted:
        method.restore(fitted[method.spec])
    elif method.fits_on_target:
        if fit_texts is None:
            raise InputError(
                f"{method.spec} fits statistics on its target texts (weights=idf-target, or a post= step without @ref): "
                "served as it is, each batch of requests would be fitted on itself. Fit it once: --fit-on FILE (the texts "
                "to fit on), or --fitted FOLDER (the shard folder of `embedlab embed SPEC --input ... --out FOLDER`)")
        method.fit_for_corpus(fit_texts, batch_size)
    else:
        method.fit_for_corpus([NEUTRAL_FIT_TEXT], batch_size)


def load_served(specs: Sequence[str], aliases: dict[str, str] | None = None, *, fit_on: str | None = None,
                fitted: Sequence[str] = (), batch_size: int = 32) -> dict[str, ServedMethod]:
    """Load and fit every spec (the positional ones and the aliases' own); the result maps every name a
    request may use (as typed, canonical, alias) to its :class:`ServedMethod`."""
    aliases = aliases or {}
    typed = list(dict.fromkeys([*specs, *aliases.values()]))
    if not typed:
        raise InputError("give at least one method spec to serve, e.g. embedlab serve minilm")
    fit_texts = Corpus(fit_on, "auto").read_all()[1] if fit_on else None
    if fit_on and not fit_texts:
        raise InputError(f"--fit-on {fit_on} holds no texts")
    served: dict[str, ServedMethod] = {}  # canonical spec → served method
    by_name: dict[str, ServedMethod] = {}
    for spec in typed:
        method = _servable(load(spec))
        entry = served.setdefault(method.spec, ServedMethod(method.spec, method, None))
        by_name[spec] = by_name[method.spec] = entry
    states = {}
    for folder in map(Path, fitted):
        manifest_spec = (OutputFolder(folder).read_manifest() or {}).get("spec") if folder.is_dir() else None
        if manifest_spec not in served:
            raise InputError(f"--fitted {folder}: not a shard folder of a served spec ({', '.join(served)})")
        states[manifest_spec] = _fitted_states(folder, manifest_spec)
    if fit_on and not any(entry.method.fits_on_target for spec, entry in served.items() if spec not in states):
        raise InputError(f"--fit-on {fit_on}: no served spec fits statistics on its target texts (weights=idf-target, or a "
                         "post= step without @ref), so there is nothing to fit; leave --fit-on out")
    for entry in served.values():
        _fit(entry.method, fit_texts, states, batch_size)
        entry.counting_tokenizer, entry.max_input_tokens = _tokenizer_of(entry.method)
    for alias, spec in aliases.items():
        if alias in by_name and by_name[alias] is not by_name[spec]:
            raise InputError(f"--name {alias}={spec}: {alias!r} already names {by_name[alias].spec}")
        by_name[alias] = by_name[spec]
    for name, entry in by_name.items():
        entry.names.append(name)
    return by_name


def find_served(served: dict[str, ServedMethod], name: str) -> ServedMethod:
    """The served method a request's ``model`` names."""
    if name not in served:
        raise UnknownNameError(f"model {name!r} is not served here; served: {', '.join(served)}")
    return served[name]

