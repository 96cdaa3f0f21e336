"""``embedlab methods`` and ``embedlab demo``."""

import re

from embedlab.cli.app import main


def test_methods_lists_families_and_presets(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for expected in ("bert+avg:MODEL", "random:MODEL", "st:MODEL", "template=none", "best-sts", "minilm"):
        assert expected in out


def test_methods_as_csv_has_one_row_per_family_option_preset_and_model(capsys):
    import csv
    import io

    from embedlab.models.named import NAMED_MODELS
    from embedlab.registry import FAMILIES, PRESETS

    assert main(["methods", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    kinds = [row["kind"] for row in rows]
    assert kinds.count("family") == len(FAMILIES) and kinds.count("preset") == len(PRESETS)
    assert kinds.count("model") == len(NAMED_MODELS)
    assert kinds.count("option") == sum(len(family.options) for family in FAMILIES.values())
    assert {"kind": "option", "name": "pooled.template", "spec": "template=none (none|T0|T1|T2|T3|T4|prompteol|echo|metaeol)",
            "description": FAMILIES["pooled"].options["template"].help} in rows


def test_demo_prints_similarity_beside_the_human_score(capsys, sts_test_rows):
    import embedlab

    assert main(["demo", "minilm", "--pairs", "4"]) == 0
    out = capsys.readouterr().out
    # every len/4-th STS-B test pair, sorted by human score: "gold  score  'a' ~ 'b'"
    chosen = [sts_test_rows[index] for index in (0, 344, 688, 1032)]
    scores = embedlab.load("minilm").similarity_pairs([(a, b) for _, a, b in chosen])
    printed = re.findall(r"^  (\d\.\d\d)  ([+-]\d\.\d{3})  ", out, flags=re.MULTILINE)
    expected = sorted((f"{gold:4.2f}", f"{score:+.3f}") for (gold, _, _), score in zip(chosen, scores))
    assert sorted(printed) == expected
    assert "Spearman over these pairs:" in out
