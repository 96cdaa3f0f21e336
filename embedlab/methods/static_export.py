"""Export a static method (``avg:``, ``random:``, ``distil:``) as a model2vec folder that ``model2vec.StaticModel`` loads unchanged.

model2vec encodes a text as the plain mean of its tokens' table rows (no special tokens, the unknown
token dropped), then optionally unit-normalises it. What of an embedlab method folds into that, exactly:

* the token table itself (random vectors, or the Avg table averaged over the spec's layers);
* any post-processing chain of *affine* steps (``zscore``, ``whiten``, ``abtt-D``, fitted on the target
  texts or ``@ref``), optionally followed by ``normalize``: the weights of a plain mean sum to 1, so
  A·mean(v) + b = mean(A·v + b) and the fitted map is applied to every table row;
* token weights (``weights=idf-ref``/``idf-target``) and token filters (``filter=…``) only when the chain
  is exactly ``normalize``: embedlab divides a text's weighted sum by the sum of its weights, model2vec
  by its token count, so the two agree up to a positive factor per text, which normalisation removes.
  The weights are folded into the table rows (a filtered token's row is zero).

What cannot be folded is refused with the reason, before any work: contextual methods (``minilm``,
``bert+avg:``, ``st:``, ``neural:``, ``match:``: a token's vector depends on its neighbours), the
[CLS]/[SEP] tokens (model2vec adds none: export with ``special=exclude``), ``pool=max``, quantile
normalisation (not affine), a ``normalize`` before other steps, and weights or filters together with an
affine step. One difference remains and is stated, not refused: model2vec drops the tokenizer's unknown
token ([UNK]) from a text, embedlab pools it; texts without it get equal vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.methods.base import EmbeddingMethod
from embedlab.methods.pooled import PooledMethod
from embedlab.methods.static_folder import StaticFolderMethod
from embedlab.pooling.postprocess import STEPS, Chain, fit_chain
from embedlab.pooling.static_folders import write_static_folder

EXPORTABLE_FAMILIES = ("avg", "random", "distil")


class NotExportableError(InputError):
    """A method whose vectors no model2vec folder reproduces (the message says why and what would)."""


@dataclass(frozen=True)
class ExportPlan:
    """What :func:`export_static` will fold: checked from the spec alone, before any work."""

    method: PooledMethod
    affine_steps: tuple[str, ...]  # post-processing steps folded into the table rows
    normalize: bool  # model2vec's final unit normalisation
    token_scales: bool  # idf weights and/or filters folded into the rows (needs normalize)
    needs_target_texts: bool  # idf-target or a step fitted on the target texts


def plan_export(method: EmbeddingMethod) -> ExportPlan:
    """Check that ``method`` folds into a model2vec folder; raise :class:`NotExportableError` naming why not."""
    if isinstance(method, StaticFolderMethod):
        raise NotExportableError(f"{method.spec} is already a model2vec folder ({method.parsed.model}); copy it instead")
    family = getattr(getattr(method, "parsed", None), "family", None)
    if not isinstance(method, PooledMethod) or family not in EXPORTABLE_FAMILIES:
        why = "its token vectors depend on the context (a transformer runs at encode time)" if family != "bert+avg" else \
            "its contextual part (1-w)·v_model depends on each token's neighbours; only the w·Avg part is static"
        raise NotExportableError(f"{method.spec} cannot be exported as a static model: {why}. "
                                 f"Static specs are avg:MODEL, random:MODEL and distil:MODEL (e.g. avg:minilm,special=exclude)")
    spec = method.parsed
    if spec.get("special") == "include":
        raise NotExportableError(f"{method.spec}: model2vec pools a text's own tokens only, while this spec includes "
                                 f"[CLS]/[SEP] in every mean; export {spec.replace(special='exclude')} instead")
    if spec.get("pool") != "mean":
        raise NotExportableError(f"{method.spec}: model2vec averages token vectors; pool={spec.get('pool')} cannot be folded")
    steps = method.pipeline.post
    normalize = bool(steps) and steps[-1].name == "normalize"  # model2vec's own final step
    body = steps[:-1] if normalize else steps
    for step in body:
        if step.name == "normalize":
            raise NotExportableError(f"{method.spec}: a normalize before other post-processing steps is not a linear map "
                                     "of the mean; only a final normalize folds (into model2vec's normalize)")
        if not step.affine:
            affine = ", ".join(spelling for kind in STEPS if kind.affine for spelling in kind.spellings)
            raise NotExportableError(f"{method.spec}: post-processing step {step.name} is not affine, so it cannot be folded "
                                     f"into the token table ({affine} and a final normalize can)")
    token_scales = spec.get("weights") != "none" or spec.get("filter") != "none"
    if token_scales and (body or not normalize):
        raise NotExportableError(
            f"{method.spec}: token weights or filters fold only when the post-processing is exactly 'normalize' "
            "(model2vec divides by the token count, embedlab by the sum of the weights: equal up to a factor per "
            f"text, which only normalisation removes); export {spec.replace(post='normalize')} instead")
    return ExportPlan(method, tuple(step.name for step in body), normalize, token_scales, method.pipeline.depends_on_texts)


def _affine_map(chain: Chain, width: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(A, b) with chain(x) = x·Aᵀ + b, read off the fitted chain and checked on random points."""
    origin = chain.transform(np.zeros((1, width), dtype=np.float32)).astype(np.float64)[0]
    basis = chain.transform(np.eye(width, dtype=np.float32)).astype(np.float64) - origin
    probe = np.random.default_rng(seed).normal(size=(8, width)).astype(np.float32)
    expected = chain.transform(probe).astype(np.float64)
    got = probe.astype(np.float64) @ basis + origin
    if not np.allclose(got, expected, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(expected).max()))):
        raise NotExportableError("the fitted post-processing chain is not affine (checked on random points)")
    return basis.T, origin


def check_export(plan: ExportPlan, out: str | Path, has_fit_texts: bool) -> None:
    """The export's guards, before any work: texts to fit on where the spec needs them, a new or empty folder."""
    if plan.needs_target_texts and not plan.method.is_fitted and not has_fit_texts:
        raise NotExportableError(f"{plan.method.spec} fits statistics on the target texts (idf-target or a post-processing "
                                 "step without @ref): give the texts to fit them on (--fit-on FILE)")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} exists and is not an empty folder; choose a new folder")


def export_static(method: EmbeddingMethod, out: str | Path, fit_texts: Sequence[str] | None = None) -> dict:
    """Write ``method`` as a model2vec folder at ``out``; returns the config written.

    Target-fitted statistics (``weights=idf-target``, post-processing steps without ``@ref``) are fitted on
    ``fit_texts`` (or taken from a method already fitted); ``@ref`` steps and idf^W need no texts.
    """
    plan = plan_export(method)
    method = plan.method
    check_export(plan, out, bool(fit_texts))
    out = Path(out)
    if fit_texts and not method.is_fitted:
        method.fit(list(fit_texts))
    pipeline = method.pipeline
    if method.is_fitted:
        idf, chain = method.idf_, method.chain_
    else:  # nothing depends on the target texts: idf^W (or none), steps fitted @ref
        idf = pipeline.idf([])
        width = method.dimension
        chain, _ = fit_chain(pipeline.post, np.zeros((1, width), dtype=np.float32),
                             lambda: method.reference_vectors(idf))
    source = pipeline.source
    vocabulary = len(method.model.tokenizer)
    table = np.asarray(source.vectors(np.arange(vocabulary)), dtype=np.float64)
    if plan.token_scales:
        scales = np.ones(vocabulary) if idf is None else np.asarray(idf, dtype=np.float64).copy()
        if pipeline.selection.excluded_vocab is not None:
            scales[pipeline.selection.excluded_vocab] = 0.0
        table = table * scales[:, None]
    if plan.affine_steps:
        affine = Chain(chain.steps[: len(plan.affine_steps)])
        matrix, offset = _affine_map(affine, table.shape[1])
        table = table @ matrix.T + offset
    config = {
        "model_type": "model2vec",
        "normalize": plan.normalize,
        "max_length": None,  # embedlab pools every token of a long text; so does model2vec without a limit
        "embedlab_spec": method.spec,
        "embedlab_fingerprint": method.fingerprint,
        "base_model": method.parsed.model,
    }
    write_static_folder(out, table.astype(np.float32), method.model.tokenizer.backend_tokenizer.to_str(), config)
    return config
