"""The one registry: every method family, the presets, and ``load(spec)``.

Families are listed explicitly here (no plugin loading): the pooling paper's families
(:mod:`embedlab.methods.pooled`), the sentence-transformers baseline (:mod:`embedlab.methods.st`), the
neural family (:mod:`embedlab.neural.family`) and token-level matching (:mod:`embedlab.matching.method`).
A new family is one :class:`~embedlab.methods.base.Family` in its own module plus one line in ``FAMILIES``;
a new preset is one line in ``PRESETS``.

Wherever a spec is accepted, a preset name (``best-sts``) stands for its spec. Models are checked when a
method is built, so an unknown or uninstalled model fails in :func:`load` with the list of named models.
"""

from __future__ import annotations

from embedlab.matching.method import MATCH_FAMILY
from embedlab.methods.base import EmbeddingMethod, Family
from embedlab.methods.concat import ConcatMethod
from embedlab.methods.pooled import POOLED_FAMILIES
from embedlab.methods.st import ST_FAMILY
from embedlab.methods.static_folder import STATIC_FAMILY
from embedlab.models.named import NAMED_MODELS, STATIC_MODELS
from embedlab.neural.family import NEURAL_FAMILY
from embedlab.spec import ConcatSpec, FamilySchema, MethodSpec, parse_spec

FAMILIES: dict[str, Family] = {family.name: family for family in (*POOLED_FAMILIES, STATIC_FAMILY, ST_FAMILY, NEURAL_FAMILY, MATCH_FAMILY)}
SCHEMAS: dict[str, FamilySchema] = {name: family.schema for name, family in FAMILIES.items()}

# Named configurations from the pooling paper's Tables 4–5, on the default model.
PRESETS: dict[str, tuple[str, str]] = {
    "baseline": ("st:minilm", "sentence-transformers' own encode"),
    "avg-last": ("minilm", "mean of the last layer (equals sentence-transformers for all-MiniLM-L6-v2)"),
    "first+last": ("minilm:layers=1+last", "mean over tokens of the first and last layers (Eq. 3)"),
    "best-sts": ("minilm:template=T4,weights=idf-target,post=quantile-u", "T4 + idf^T + quantile-u, best average STS in Table 4"),
    "best-clustering": ("bert+avg:minilm,layers=1+last,weights=idf-target,post=quantile-u@ref+normalize", "BERT+Avg, idf^T, quantile-u^W, normalize (Table 4)"),
    "prompt-mask": ("minilm:template=T0,pool=mask", "PromptBERT's T0 template, [MASK] vector"),
    "no-biases": ("minilm:layers=1+last,filter=biases,post=normalize", "-biases + normalize (Table 4)"),
    "random-idf": ("random:minilm,weights=idf-ref,post=zscore", "random token vectors, idf^W + z-score (Table 4)"),
    "whiten-ref": ("minilm:layers=1+last,post=whiten@ref", "whitening fitted on WikiText-2 (Table 5)"),
}


def parse(spec: str) -> MethodSpec | ConcatSpec:
    """The parsed, canonical form of a spec string or preset name (``str(parse(s))`` is its canonical text)."""
    if isinstance(spec, str) and spec in PRESETS:
        spec = PRESETS[spec][0]
    return parse_spec(spec, SCHEMAS, [*NAMED_MODELS, *STATIC_MODELS])


def build(spec: MethodSpec) -> EmbeddingMethod:
    """The method of one parsed spec; raises ModelNotFoundError now if its model cannot be loaded."""
    family = FAMILIES[spec.family]
    family.check_model(spec.model)
    return family.build(spec)


def load(spec: str) -> EmbeddingMethod:
    """The method a spec string or preset names, e.g. ``load("minilm:layers=1+last,post=quantile-u")``, ``load("best-sts")``."""
    parsed = parse(spec)
    if isinstance(parsed, ConcatSpec):
        return ConcatMethod(parsed, [build(part) for part in parsed.parts])
    return build(parsed)

