"""The pooled families' options, each stated once, and the checks of a spec against its model.

Each family's option table lists its options in the order its canonical specs list them; the checks
(:func:`check_for_model`) refuse, before any work, what a model cannot do with a spec.
"""

from __future__ import annotations

from embedlab.errors import InputError
from embedlab.methods.precision import COMPUTE_OPTIONS, OUTPUT_OPTIONS
from embedlab.methods.prompts import warn_unusual_pairing
from embedlab.models.loading import LoadedModel, ModelTraits
from embedlab.pooling.aggregation import AGGREGATIONS
from embedlab.pooling.pipeline import WEIGHTINGS
from embedlab.pooling.postprocess import STEP_NAMES, validate_chain
from embedlab.pooling.weights import FILTERS
from embedlab.spec import MethodSpec, Option, finite_number, whole_number
from embedlab.tokens.templates import NO_MASK_ALTERNATIVES, TEMPLATE_NAMES, needs_mask_token

# --- options, each stated once ------------------------------------------------------------------------

def _validate_layers(value: str) -> str:
    items = value.split("+")
    for item in items:
        if item != "last" and not item.lstrip("-").isdigit():
            raise InputError("layers are integers from -1 to L, or 'last', joined by '+'")
        if item != "last" and int(item) < -1:
            raise InputError("the lowest layer is -1 (static token embeddings)")
    unique = sorted(set(items), key=lambda item: (item == "last", int(item) if item != "last" else 0))
    return "+".join(unique)


def _validate_filter(value: str) -> str:
    if value in ("none", "biases"):
        return value
    items = set(value.split("+"))
    if items - set(FILTERS):
        raise InputError(f"filters are none, biases, or a '+'-joined subset of {', '.join(FILTERS)}")
    return "biases" if items == set(FILTERS) else "+".join(name for name in FILTERS if name in items)


# token source
LAYERS_OPTION = Option("last", help="layers averaged, '+'-joined: -1 (static), 0 (embedding output), 1..L, last", validate=_validate_layers)
TEMPLATE_OPTION = Option("none", ("none", *TEMPLATE_NAMES), "prompt template: T0–T4 (Table 1, need a mask token); for models "
                         "without one prompteol (with pool=last), metaeol (four prompts, pool=last), echo (the text twice, pool=mask)")
SEED_OPTION = Option("0", help="seed of the random token vectors", validate=whole_number(0))
STD_OPTION = Option("0.1", help="standard deviation of the random token vectors", validate=finite_number(positive=True))


def _validate_truncate(value: str) -> str:
    return value if value == "none" else whole_number(1)(value)


# Long texts are split into sentence-packed chunks and every token pooled (the papers' protocol). A cut is
# only ever asked for by name: `truncate=256` keeps each text's first 256 input tokens, special tokens
# included, as sentence-transformers' max_seq_length does (the neural paper's SummEval row, Table 4).
TRUNCATE_OPTION = Option("none", help="cut each text to its first N model-input tokens, special tokens included "
                         "(sentence-transformers' max_seq_length); none: long texts are chunked by sentences, nothing is cut",
                         validate=_validate_truncate)


def _validate_dim(value: str) -> str:
    return value if value == "model" else whole_number(1)(value)


# The pooling paper's RE vectors are 768 wide (bert-base-uncased); MiniLM has the same uncased vocabulary
# at width 384, so `random:minilm,dim=768` is the paper's RE model up to the random draw.
DIM_OPTION = Option("model", help="width of the random token vectors: 'model' (the model's hidden size) or a whole number", validate=_validate_dim)
W_OPTION = Option("0.5", help="weight of the Avg vectors in (1-w)·model + w·Avg (Eq. 10); may be negative", validate=finite_number())
# token selection and weights
WEIGHTS_OPTION = Option("none", WEIGHTINGS, "token weights: none, idf over the target texts (idf^T), idf over WikiText-2 (idf^W)")
FILTER_OPTION = Option("none", help="drop tokens: none, biases (= frequent+punct+subword), or a '+'-joined subset", validate=_validate_filter)
SPECIAL_OPTION = Option("include", ("include", "exclude"), "include the special tokens the tokenizer adds in means (sentence-transformers "
                        "does): [CLS]/[SEP] of an encoder, BOS/EOS of a decoder (none for GPT-2 or SmolLM2)")
# aggregation: static sources have no template [MASK] tokens and one chunk per text
POOL_OPTION = Option("mean", tuple(AGGREGATIONS), "token aggregation: mean, cls (encoders), max, mask (the template's marked tokens: "
                     "[MASK] tokens, echo's second copy), mean-no-mask, last (each chunk's last token; decoders)")
STATIC_POOL_OPTION = Option("mean", ("mean", "max"), "token aggregation: mean or max")
# post-processing
POST_OPTION = Option("none", help=f"post-processing chain, '+'-joined: {', '.join(STEP_NAMES)}; '@ref' fits a step on WikiText-2",
                     validate=validate_chain)

# Each family's options in the order its canonical specs list them (the order is part of every stored spec;
# options added later go at the end, so that no earlier canonical spec changes). Families that run a
# transformer take the compute options (dtype, quantize); every family takes the output options.
POOLED_OPTIONS = {"layers": LAYERS_OPTION, "pool": POOL_OPTION, "weights": WEIGHTS_OPTION, "filter": FILTER_OPTION,
                  "special": SPECIAL_OPTION, "post": POST_OPTION, "template": TEMPLATE_OPTION, "truncate": TRUNCATE_OPTION,
                  **COMPUTE_OPTIONS, **OUTPUT_OPTIONS}
RANDOM_OPTIONS = {"seed": SEED_OPTION, "std": STD_OPTION, "dim": DIM_OPTION, "weights": WEIGHTS_OPTION, "filter": FILTER_OPTION,
                  "special": SPECIAL_OPTION, "post": POST_OPTION, "pool": STATIC_POOL_OPTION, **OUTPUT_OPTIONS}
AVG_OPTIONS = {"layers": LAYERS_OPTION, "weights": WEIGHTS_OPTION, "filter": FILTER_OPTION,
               "special": SPECIAL_OPTION, "post": POST_OPTION, "pool": STATIC_POOL_OPTION, **COMPUTE_OPTIONS, **OUTPUT_OPTIONS}
MIX_OPTIONS = {"w": W_OPTION, **POOLED_OPTIONS}

DISTIL_OPTIONS = {"weights": WEIGHTS_OPTION, "filter": FILTER_OPTION, "special": SPECIAL_OPTION, "post": POST_OPTION,
                  "pool": STATIC_POOL_OPTION, **COMPUTE_OPTIONS, **OUTPUT_OPTIONS}
# A model2vec model's own last step: unit length when its config.json says "normalize": true.
NORMALIZE_OPTION = Option("model", ("model", "yes", "no"),
                          "unit-normalise the final vectors: model (as the folder's config.json says), yes, no")
STATIC_OPTIONS = {"weights": WEIGHTS_OPTION, "filter": FILTER_OPTION, "post": POST_OPTION, "pool": STATIC_POOL_OPTION,
                  "normalize": NORMALIZE_OPTION, **OUTPUT_OPTIONS}
STATIC = "static"



def check_for_model(model: LoadedModel | ModelTraits, spec: MethodSpec) -> None:
    """Refuse, before any work, what this model cannot do: a mask template without a mask token, the [CLS]
    vector of a decoder (its first token has seen nothing else), a template's marks it does not have.

    Run when the method is built, on the model's config and tokenizer files (:func:`model_traits`), and
    again on the loaded model (a GGUF file's traits are known once it is converted)."""
    name = model.name if isinstance(model, LoadedModel) else spec.model
    kind = model.kind
    has_mask = model.tokenizer.mask_token_id is not None if isinstance(model, LoadedModel) else model.has_mask_token
    schema_options = spec.schema.options if spec.schema is not None else {}
    template = spec.get("template") if "template" in schema_options else "none"
    if needs_mask_token(template) and not has_mask:
        raise InputError(f"{spec}: template {template} needs a mask token and model {name!r} ({kind}) has none; "
                         f"use {NO_MASK_ALTERNATIVES}")
    _check_limits(name, model.num_layers, model.max_length, model.special_tokens, spec)
    pool = spec.get("pool")
    if pool == "cls" and kind == "decoder":
        raise InputError(f"{spec}: pool=cls takes the first token, which in decoder {name!r} has seen only itself; "
                         "use pool=last (the last token, which has seen the whole text) or pool=mean")
    warn_unusual_pairing(str(spec), template, pool)
    if pool in ("mask", "mean-no-mask") and template in ("none", "prompteol", "metaeol"):
        hint = "pool=last" if template in ("prompteol", "metaeol") else "a T0–T4 template (mask token) or template=echo"
        raise InputError(f"{spec}: pool={pool} averages the tokens a template marks, and template={template} marks none; use {hint}")


def _check_limits(name: str, num_layers: int | None, max_length: int | None, special_tokens: int, spec: MethodSpec) -> None:
    """A layer the model does not have, or a cut longer than its input, refused with the model's limit."""
    options = spec.schema.options if spec.schema is not None else {}
    if "layers" in options and num_layers is not None:
        for item in spec.get("layers").split("+"):
            if item != "last" and not -1 <= int(item) <= num_layers:
                raise InputError(f"{spec}: layers={spec.get('layers')}: layer {item} is beyond model {name!r}, which has "
                                 f"{num_layers} layers; use layers from -1 to {num_layers} (-1: static token embeddings, "
                                 f"0: embedding output, {num_layers} or last: the last layer), joined by '+'")
    if "truncate" in options and max_length is not None and spec.get("truncate") != "none":
        truncate, shortest = int(spec.get("truncate")), special_tokens + 1
        if truncate < shortest:  # before any text is read: the cut holds the special tokens and nothing else
            raise InputError(f"{spec}: truncate={truncate}: the {special_tokens} special token(s) {name} adds leave no room "
                             f"for text; use truncate={shortest} to truncate={max_length}, or leave truncate out")
        if truncate > max_length:
            raise InputError(f"{spec}: truncate={truncate}: model {name!r} takes at most {max_length} input "
                             f"tokens; use truncate={shortest} to truncate={max_length}, or leave truncate out (without truncate, "
                             "long texts are split into sentence-packed chunks and nothing is cut)")
