"""``embedlab export-static``: write an ``avg:``/``random:`` method as a model2vec folder.

The folder (``model.safetensors``, ``tokenizer.json``, ``config.json``, ``modules.json``) loads unchanged
with ``model2vec.StaticModel.from_pretrained`` and with embedlab's own ``static:FOLDER``; what folds into
it and what is refused is stated in :mod:`embedlab.methods.static_export`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embedlab.cli.arguments import add_quiet
from embedlab.runtime.outputs import output_folder


def _cmd_export_static(args: argparse.Namespace) -> int:
    import embedlab
    from embedlab.data.corpus import Corpus
    from embedlab.methods.static_export import check_export, export_static, plan_export

    method = embedlab.load(args.spec)
    plan = plan_export(method)  # refuses a non-static spec before anything is loaded or computed
    out = Path(args.out)
    check_export(plan, out, args.fit_on is not None)
    texts = Corpus(args.fit_on, "auto").read_all()[1] if args.fit_on else None
    with output_folder(out, inputs=(args.fit_on,)) as staging:  # whole or nothing, one writer at a time
        config = export_static(method, staging, texts)
    folded = [*plan.affine_steps, *(["token weights/filters"] if plan.token_scales else [])]
    print(f"wrote {out}: {config['embedlab_spec']} as a model2vec model "
          f"(folded: {', '.join(folded) or 'nothing but the table'}; normalize={config['normalize']}). "
          f"Load it with model2vec.StaticModel.from_pretrained({str(out)!r}) or embedlab static:{out}. "
          "Texts containing the tokenizer's unknown token differ: model2vec drops it, embedlab pools it.")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``export-static``."""
    export = subparsers.add_parser("export-static", help="write an avg:/random: method as a model2vec static model folder")
    export.add_argument("spec", help="a static method spec, e.g. avg:minilm,special=exclude or random:minilm,special=exclude,post=whiten@ref")
    export.add_argument("--out", required=True, help="folder to write (new or empty)")
    export.add_argument("--fit-on", default=None,
                        help="texts to fit target statistics on (idf-target, post-processing without @ref): a file embed --input reads")
    add_quiet(export)
    export.set_defaults(handler=_cmd_export_static)
