"""The ``static`` family: a model2vec folder (``static:PATH``, ``static:tokenlearn``) pooled as the other static
sources are: its table, token mapping and weights, with the paper's token weights and post-processing on top
as for ``avg``.

What sets it apart from the families that run a transformer, the method answers itself: its model is a
folder checked by :func:`~embedlab.pooling.static_folders.check_static_model` (the family's ``check_model``),
there are no config or tokenizer files to check a spec against, model2vec's own tokenisation pools every
token it keeps (it adds no special tokens), and the folder's config may end the chain with ``normalize``.
"""

from __future__ import annotations

import functools

from embedlab.methods.base import Family
from embedlab.methods.pooled import PooledMethod, build_pipeline
from embedlab.methods.pooled_options import STATIC, STATIC_OPTIONS
from embedlab.models.loading import ModelTraits
from embedlab.pooling.pipeline import PoolingPipeline
from embedlab.pooling.postprocess import ChainStep, parse_chain
from embedlab.pooling.sources import ImportedStaticTokens
from embedlab.pooling.static_folders import StaticModelFolder, check_static_model, load_static_model


def _final_normalize(model: StaticModelFolder, choice: str) -> bool:
    return model.normalize if choice == "model" else choice == "yes"


class StaticFolderMethod(PooledMethod):
    """A model2vec folder's table pooled (see the module docstring)."""

    def _model_traits(self) -> ModelTraits | None:
        return None  # a folder of a table, no transformer; its width is checked at encode

    @functools.cached_property
    def pipeline(self) -> PoolingPipeline:
        spec = self.parsed
        model = load_static_model(spec.model)
        post = parse_chain(spec.get("post"))
        final = ChainStep("normalize")
        if _final_normalize(model, spec.get("normalize")) and post[-1:] != [final]:
            post.append(final)
        return build_pipeline(spec, model, ImportedStaticTokens(model), True, post)


STATIC_FAMILY = Family(STATIC, STATIC_OPTIONS, StaticFolderMethod, "a model2vec static model folder (static:PATH, static:tokenlearn): "
                       "its token table, weights and normalisation, with token weights and post-processing on top", check_static_model)
