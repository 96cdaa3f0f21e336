"""The two sides of an asymmetric search: a spec's ``query_template=`` and ``doc_template=`` options.

Retrieval models are often trained with a prompt per side ("query: …", "passage: …"; e5, bge), and decoders are
prompted (PromptEOL). A pooled spec names each side's template; ``encode_query`` / ``encode_document`` (and
``encode(prompt_name="query")``) encode under it, as sentence-transformers does with its ``prompts``. A
template is tokenised apart from the text (tokens/templates.py), so for WordPiece models the result equals
sentence-transformers' ``encode(texts, prompt="query: ")`` (tested).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings

from embedlab.errors import InputError
from embedlab.pooling.pipeline import PoolingPipeline
from embedlab.spec import MethodSpec, Option
from embedlab.tokens.templates import Template, role_template


def _validate_role_template(value: str) -> str:
    role_template(value)  # an unknown name, or a file without one [X], fails when the spec is read
    return value


# each side's template replaces template= on that side
ROLE_OPTIONS = {
    "query_template": Option("none", help="template of the query side (encode_query, prompt_name='query'): e5-query, bge-query, "
                             "any template name, or @FILE (one line with [X])", validate=_validate_role_template),
    "doc_template": Option("none", help="template of the document side (encode_document, prompt_name='document'): e5-passage, "
                           "any template name, or @FILE", validate=_validate_role_template),
}
_ROLES = {"query": "query_template", "document": "doc_template"}


def role_prompts(spec: MethodSpec, options: dict) -> dict[str, str]:
    """``{"query": template text, "document": …}`` for the sides ``spec`` names (sentence-transformers' ``prompts``)."""
    return {role: role_template(spec.get(option)).text for role, option in _ROLES.items()
            if option in options and spec.get(option) != "none"}


def user_prompts_digest(spec: MethodSpec, prompts: dict[str, str]) -> str:
    """A user's template files are named by path in the spec, so the ``prompts`` read from them join the
    method's identity; built-in templates are named by the spec alone, and every identity without a file is
    unchanged."""
    options = spec.schema.options if spec.schema is not None else {}
    if not any(option in options and spec.get(option).startswith("@") for option in _ROLES.values()):
        return ""
    return "-prompts-" + hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()[:12]


def prompted_pipeline(pipeline: PoolingPipeline, prompt: str, spec: str) -> PoolingPipeline:
    """``pipeline`` with its token source under ``prompt``: a template with [X], or a prefix as
    sentence-transformers takes one."""
    source = pipeline.source
    if not source.templated:
        raise InputError(f"{spec}: prompts need a transformer's contextual token states; this source has none")
    template = Template("prompt", prompt if "[X]" in prompt else f"{prompt}[X]")
    return dataclasses.replace(pipeline, source=dataclasses.replace(source, template=template))


def warn_unusual_pairing(spec: str, template: str, pool: str) -> None:
    """Warn where a spec pairs a prompt template with a pooling its paper does not (allowed, rarely meant)."""
    if pool == "mean" and template in ("prompteol", "metaeol"):
        warnings.warn(f"{spec}: template={template} is paired with pool=last in its paper (the last token, which the "
                      "prompt asks to sum up the text); pool=mean also averages the prompt's own tokens",
                      UserWarning, stacklevel=4)
