"""Head adapters: where each architecture keeps its language-model head's 1-D layers (neural-embeddings paper §2).

The paper micro-tunes "a few 1-D layers" of BERT's masked-LM head: the transform's dense bias and
LayerNorm weight/bias (L2, L0, L1), or the last block's output vectors (Appendix G). Every masked LM
here has the same head shape — dense → activation → norm → decoder (+ output bias) — under other module
names, and a causal LM's head is its final norm followed by the output embeddings. An adapter, picked
from the model class, names these modules; :class:`HeadLayout` turns them into parameter names and a
functional form the batched path evaluates with one row of every tuned vector per text.

Families (class names → adapter):

* BERT (``cls.predictions``), ALBERT (``predictions``), ELECTRA generator (``generator_predictions`` +
  ``generator_lm_head``), RoBERTa / XLM-R / CamemBERT / MPNet (``lm_head``), DistilBERT
  (``vocab_transform`` / ``vocab_layer_norm`` / ``vocab_projector``), ModernBERT (``head`` + ``decoder``);
* causal LMs (GPT-2, Llama, Qwen2/3, Mistral, Gemma 1–3): the final norm (``ln_f`` / ``norm``) and
  ``lm_head``; the head preset tunes the final norm's weight (and bias where it has one).

``params=block`` tunes the last block's 1-D layers: for post-LN encoders (BERT, RoBERTa, MPNet,
ELECTRA, DistilBERT) its output dense bias and output LayerNorm, which act position-wise after
everything frozen, so the batched path covers them; for pre-LN models (ModernBERT, causal LMs) and
ALBERT (one layer shared by every block) the last block's norms / shared vectors, which feed
attention: the batched path re-runs that block (ALBERT: the encoder) every epoch with per-text rows
(:mod:`~embedlab.neural.replay`, :attr:`HeadLayout.replay_module`), the reference path the whole model.

Every layout is checked when built: its functional head must reproduce the model's own head modules
on random inputs, so a module that computes something else is refused rather than silently misread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

NORM_KINDS = ("layer", "rms", "rms-offset")  # LayerNorm; RMSNorm scaled by w (Llama) or by 1 + w (Gemma)


class AdapterError(RuntimeError):
    """A model whose language-model head embedlab cannot name or reproduce."""


@dataclass(frozen=True)
class NormSpec:
    """A norm layer as the batched path evaluates it: its kind, parameter names, width and epsilon."""

    kind: str
    weight: str
    bias: str | None
    width: int
    eps: float

    def apply(self, values: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """The norm with (possibly per-position) ``weight`` / ``bias`` rows; the same operations as the modules."""
        if self.kind == "layer":
            normalised = torch.nn.functional.layer_norm(values, (self.width,), eps=self.eps) * weight
            return normalised + bias if bias is not None else normalised
        normalised = values * torch.rsqrt(values.pow(2).mean(-1, keepdim=True) + self.eps)
        return normalised * (1.0 + weight) if self.kind == "rms-offset" else normalised * weight


@dataclass(frozen=True)
class HeadLayout:
    """One model's head as parameter names plus the functions that evaluate it.

    Features are what the frozen model gives the head: the encoder's last hidden state (masked LMs) or
    the final norm's input (causal LMs). ``transform`` maps features to the decoder input ``z`` with the
    real modules; the batched path recomputes it from ``dense_*``, ``activation`` and ``norm``.
    """

    family: str
    causal: bool
    dense_weight: str | None
    dense_bias: str | None
    activation: Callable[[torch.Tensor], torch.Tensor] | None
    norm: NormSpec
    output_bias: str | None
    head_vectors: tuple[str, ...]  # the "head" preset, in the paper's order L0, L1, L2 (those that exist)
    head_tensors: tuple[str, ...]  # every head tensor (content hash, head files, checkpoint check)
    block_vectors: tuple[str, ...]  # the "block" preset
    block_batched: bool  # the block vectors act position-wise after everything frozen (post-LN)
    block_norm: NormSpec | None = None  # post-LN: the last block's output norm …
    block_dense_bias: str | None = None  # … and the dense bias added before it
    transform: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor] = field(default=lambda model, features: features, repr=False)
    feature_module: Callable[[torch.nn.Module], torch.nn.Module | None] = field(default=lambda model: None, repr=False)
    block_norm_module: Callable[[torch.nn.Module], torch.nn.Module | None] = field(default=lambda model: None, repr=False)
    # pre-LN blocks and shared layers: the module the batched path re-runs every epoch (the last block; ALBERT's
    # encoder) and how its output becomes the head's features (neural/replay.py); None where the block is post-LN
    replay_module: Callable[[torch.nn.Module], torch.nn.Module] | None = field(default=None, repr=False)
    replay_output: Callable[[torch.nn.Module, object], torch.Tensor] = field(default=lambda model, output: _first(output), repr=False)

    def features(self, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The head's input at every position (gradients flow when enabled)."""
        capture_at = self.feature_module(model)
        if capture_at is None:
            return model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        captured: list[torch.Tensor] = []
        caller = threading.get_ident()

        def capture(module: torch.nn.Module, args: tuple) -> None:
            # the frozen forward runs one batch per core on the same model (runtime/streams.py): the hook sees every
            # thread's forward through this module, and another stream's input is not this call's features
            if threading.get_ident() == caller:
                captured.append(args[0])

        hook = capture_at.register_forward_pre_hook(capture)
        try:
            model.base_model(input_ids=input_ids, attention_mask=attention_mask)
        finally:
            hook.remove()
        return captured[-1]

    def logits(self, model: torch.nn.Module, features: torch.Tensor) -> torch.Tensor:
        """The real head: transform, then the output embeddings (and output bias)."""
        return model.get_output_embeddings()(self.transform(model, features))


def _first(output) -> torch.Tensor:
    """A module's hidden states whether it returns a tensor, a tuple or a model output."""
    return output if isinstance(output, torch.Tensor) else output[0]


def _parameter_names(model: torch.nn.Module) -> dict[int, str]:
    """Each parameter's first name (tied parameters appear once, as in ``named_parameters``)."""
    names: dict[int, str] = {}
    for name, parameter in model.named_parameters():
        names.setdefault(id(parameter), name)
    return names


def _name_of(names: dict[int, str], parameter: torch.Tensor | None) -> str | None:
    return None if parameter is None else names[id(parameter)]


def norm_spec_of(module: torch.nn.Module, names: dict[int, str], where: str) -> NormSpec:
    """A norm module as a :class:`NormSpec`; its kind read off its output on a probe (refused if none fits)."""
    weight = getattr(module, "weight", None)
    if weight is None:
        raise AdapterError(f"{where}: norm {type(module).__name__} has no weight")
    bias = getattr(module, "bias", None)
    width = int(weight.shape[0])
    if isinstance(module, torch.nn.LayerNorm):
        return NormSpec("layer", names[id(weight)], _name_of(names, bias), width, float(module.eps))
    eps = getattr(module, "eps", None)
    eps = float(eps if eps is not None else getattr(module, "variance_epsilon"))
    probe = torch.randn(3, width, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        output = module(probe)
        for kind in ("rms", "rms-offset"):
            spec = NormSpec(kind, names[id(weight)], None, width, eps)
            if bias is None and torch.allclose(spec.apply(probe, weight, None), output, atol=1e-5, rtol=1e-4):
                return spec
    raise AdapterError(f"{where}: norm {type(module).__name__} is neither a LayerNorm nor an RMSNorm (w or 1 + w scaling)")


def _one_dimensional(module: torch.nn.Module, names: dict[int, str], keep: Callable[[str], bool]) -> tuple[str, ...]:
    return tuple(names[id(parameter)] for local, parameter in module.named_parameters() if parameter.dim() == 1 and keep(local))


def _masked_layout(
    model: torch.nn.Module, family: str, dense: torch.nn.Linear | None, activation, norm: torch.nn.Module,
    output_bias: torch.Tensor | None, transform, block_output: tuple[torch.nn.Module, torch.nn.Linear] | None,
    block_vectors: tuple[str, ...] = (),
    replay: tuple[Callable, Callable] | None = None,
) -> HeadLayout:
    """A masked LM's layout: dense → activation → norm head; post-LN last block when ``block_output`` is given."""
    names = _parameter_names(model)
    norm_spec = norm_spec_of(norm, names, family)
    dense_bias = _name_of(names, dense.bias) if dense is not None else None
    head_vectors = tuple(name for name in (norm_spec.weight, norm_spec.bias, dense_bias) if name is not None)
    head_tensors = tuple(
        name for name in (_name_of(names, dense.weight) if dense is not None else None, dense_bias, norm_spec.weight, norm_spec.bias, _name_of(names, output_bias))
        if name is not None
    )
    block_norm = block_dense_bias = None
    if block_output is not None:
        block_norm_module, block_dense = block_output
        block_norm = norm_spec_of(block_norm_module, names, family)
        block_dense_bias = names[id(block_dense.bias)]
        block_vectors = tuple(name for name in (block_norm.weight, block_norm.bias, block_dense_bias) if name is not None)
    return HeadLayout(
        family=family, causal=False, dense_weight=_name_of(names, dense.weight) if dense is not None else None, dense_bias=dense_bias,
        activation=activation, norm=norm_spec, output_bias=_name_of(names, output_bias), head_vectors=head_vectors, head_tensors=head_tensors,
        block_vectors=block_vectors, block_batched=block_output is not None, block_norm=block_norm, block_dense_bias=block_dense_bias,
        transform=transform, block_norm_module=(lambda m: block_output[0]) if block_output is not None else (lambda m: None),
        **(dict(replay_module=replay[0], replay_output=replay[1]) if replay is not None else {}),
    )


def _bert(model) -> HeadLayout:
    transform = model.cls.predictions.transform
    last = model.bert.encoder.layer[-1].output
    return _masked_layout(model, "BERT", transform.dense, transform.transform_act_fn, transform.LayerNorm, model.cls.predictions.bias,
                          lambda m, features: m.cls.predictions.transform(features), (last.LayerNorm, last.dense))


def _roberta_like(family: str):
    def build(model) -> HeadLayout:
        head = model.lm_head
        last = model.base_model.encoder.layer[-1].output
        return _masked_layout(model, family, head.dense, torch.nn.functional.gelu, head.layer_norm, head.decoder.bias,
                              lambda m, features: m.lm_head.layer_norm(torch.nn.functional.gelu(m.lm_head.dense(features))), (last.LayerNorm, last.dense))
    return build


def _albert(model) -> HeadLayout:
    head = model.predictions
    shared = model.albert.encoder.albert_layer_groups[-1].albert_layers[-1]  # shared by every block: not position-wise
    names = _parameter_names(model)
    block = (names[id(shared.full_layer_layer_norm.weight)], names[id(shared.full_layer_layer_norm.bias)], names[id(shared.ffn_output.bias)])
    return _masked_layout(model, "ALBERT", head.dense, head.activation, head.LayerNorm, head.decoder.bias,
                          lambda m, features: m.predictions.LayerNorm(m.predictions.activation(m.predictions.dense(features))), None, block,
                          (lambda m: m.albert.encoder, lambda m, output: _first(output)))  # the shared layer acts in every block


def _electra(model) -> HeadLayout:
    head = model.generator_predictions
    last = model.electra.encoder.layer[-1].output
    return _masked_layout(model, "ELECTRA generator", head.dense, head.activation, head.LayerNorm, model.generator_lm_head.bias,
                          lambda m, features: m.generator_predictions(features), (last.LayerNorm, last.dense))


def _distilbert(model) -> HeadLayout:
    last = model.distilbert.transformer.layer[-1]
    return _masked_layout(model, "DistilBERT", model.vocab_transform, model.activation, model.vocab_layer_norm, model.vocab_projector.bias,
                          lambda m, features: m.vocab_layer_norm(m.activation(m.vocab_transform(features))), (last.output_layer_norm, last.ffn.lin2))


def _modernbert(model) -> HeadLayout:
    names = _parameter_names(model)
    block = _one_dimensional(model.model.layers[-1], names, lambda local: "norm" in local)
    return _masked_layout(model, "ModernBERT", model.head.dense, model.head.act, model.head.norm, model.decoder.bias,
                          lambda m, features: m.head(features), None, block,
                          (lambda m: m.model.layers[-1], lambda m, output: m.model.final_norm(_first(output))))


def _final_norm(model) -> torch.nn.Module:
    base = model.base_model
    for attribute in ("norm", "ln_f", "final_layernorm", "final_layer_norm"):
        module = getattr(base, attribute, None)
        if isinstance(module, torch.nn.Module):
            return module
    raise AdapterError(f"{type(model).__name__}: no final norm found (looked for norm, ln_f, final_layernorm)")


def _blocks(model) -> torch.nn.ModuleList:
    base = model.base_model
    for attribute in ("layers", "h"):
        module = getattr(base, attribute, None)
        if isinstance(module, torch.nn.ModuleList):
            return module
    raise AdapterError(f"{type(model).__name__}: no list of blocks found (looked for layers, h)")


def _causal(model) -> HeadLayout:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(config, "final_logit_softcapping", None):
        raise AdapterError(f"{type(model).__name__}: final logit soft-capping ({config.final_logit_softcapping}) is not supported by the neural head")
    names = _parameter_names(model)
    final = _final_norm(model)
    norm = norm_spec_of(final, names, type(model).__name__)
    decoder = model.get_output_embeddings()
    output_bias = _name_of(names, getattr(decoder, "bias", None))
    head_vectors = tuple(name for name in (norm.weight, norm.bias) if name is not None)
    block = _one_dimensional(_blocks(model)[-1], names, lambda local: "norm" in local or local.split(".")[0].startswith("ln_"))
    return HeadLayout(
        family=type(model).__name__.removesuffix("ForCausalLM").removesuffix("LMHeadModel"), causal=True, dense_weight=None, dense_bias=None,
        activation=None, norm=norm, output_bias=output_bias, head_vectors=head_vectors,
        head_tensors=tuple(name for name in (*head_vectors, output_bias) if name is not None), block_vectors=block, block_batched=False,
        transform=lambda m, features: _final_norm(m)(features), feature_module=_final_norm,
        replay_module=lambda m: _blocks(m)[-1],  # its output is the final norm's input, the head's features
    )


# Model class → adapter. Families are named as in the error message listing them.
ADAPTERS: dict[str, Callable[[torch.nn.Module], HeadLayout]] = {
    "BertForMaskedLM": _bert,
    "AlbertForMaskedLM": _albert,
    "ElectraForMaskedLM": _electra,
    "RobertaForMaskedLM": _roberta_like("RoBERTa"),
    "XLMRobertaForMaskedLM": _roberta_like("XLM-R"),
    "CamembertForMaskedLM": _roberta_like("CamemBERT"),
    "MPNetForMaskedLM": _roberta_like("MPNet"),
    "DistilBertForMaskedLM": _distilbert,
    "ModernBertForMaskedLM": _modernbert,
    "GPT2LMHeadModel": _causal,
    "LlamaForCausalLM": _causal,
    "MistralForCausalLM": _causal,
    "Qwen2ForCausalLM": _causal,
    "Qwen3ForCausalLM": _causal,
    "GemmaForCausalLM": _causal,
    "Gemma2ForCausalLM": _causal,
    "Gemma3ForCausalLM": _causal,
}
MASKED_FAMILIES = "BERT, ALBERT, ELECTRA (generator), RoBERTa, XLM-R, CamemBERT, MPNet, DistilBERT, ModernBERT"
CAUSAL_FAMILIES = "GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2 (no soft-capping), Gemma 3"


def supported_message() -> str:
    return f"supported masked LMs: {MASKED_FAMILIES}; causal LMs: {CAUSAL_FAMILIES}"


def head_layout(model: torch.nn.Module) -> HeadLayout:
    """The layout of ``model``'s head, checked against its own modules; a clear error for any other architecture."""
    builder = ADAPTERS.get(type(model).__name__)
    if builder is None:
        raise AdapterError(f"{type(model).__name__} has no neural-embedding head adapter; {supported_message()}")
    layout = builder(model)
    _check_layout(model, layout)
    return layout


def _check_layout(model: torch.nn.Module, layout: HeadLayout) -> None:
    """The functional head equals the model's own head modules on random features (else the adapter is wrong)."""
    state = dict(model.named_parameters())
    width = int(state[layout.dense_weight].shape[1]) if layout.dense_weight else layout.norm.width
    features = torch.randn(4, width, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = layout.transform(model, features)
        values = features @ state[layout.dense_weight].T if layout.dense_weight else features
        if layout.dense_bias:
            values = values + state[layout.dense_bias]
        if layout.activation is not None:
            values = layout.activation(values)
        norm = layout.norm
        functional = norm.apply(values, state[norm.weight], state[norm.bias] if norm.bias else None)
    if not torch.allclose(functional, expected, atol=1e-4, rtol=1e-4):
        raise AdapterError(f"{type(model).__name__}: the {layout.family} head adapter does not reproduce the model's head (max difference "
                           f"{float((functional - expected).abs().max()):.2e})")
