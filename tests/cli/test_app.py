"""The ``embedlab`` entry point: every command group registered, ``--version``, ``python -m embedlab``,
and expected failures as one line on stderr with exit status 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import embedlab
from embedlab.cli.app import build_parser, main
import preloaded  # tests/preloaded.py: child processes forked from a preloaded Python

REPO_ROOT = Path(embedlab.__file__).resolve().parent.parent
COMMANDS = ("embed", "similarity", "methods", "demo", "eval", "results", "report", "mlm-head", "explain",
            "train-token-weights", "alignsim")


def test_every_command_group_is_registered():
    parser = build_parser()
    subcommands = next(action for action in parser._actions if action.dest == "command").choices
    assert set(COMMANDS) <= set(subcommands)


def test_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"embedlab {embedlab.__version__}"


def test_python_dash_m_embedlab_help():
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    finished = subprocess.run([sys.executable, "-m", "embedlab", "--help"], capture_output=True, text=True,
                              env=environment, cwd=REPO_ROOT, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("usage: embedlab")
    for command in COMMANDS:
        assert command in finished.stdout


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as stopped:
        main([])
    assert stopped.value.code == 2
    assert "required" in capsys.readouterr().err


def test_expected_failures_are_one_line_and_status_2(capsys):
    assert main(["similarity", "minilm:colour=red", "a", "b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embedlab similarity: error:") and len(err.strip().splitlines()) == 1
    assert "valid options" in err


@pytest.mark.parametrize("bug", [KeyError("encoder.layer.7.output"), ValueError("operands could not be broadcast together")])
def test_a_bug_is_status_1_with_the_traceback_hint_not_blamed_on_the_input(bug, capsys, monkeypatch):
    """An exception embedlab did not raise on purpose (an internal KeyError, a ValueError from numpy) is a bug:
    status 1, its type named with the debug hint; only embedlab's InputError (a bad spec above) is status 2."""
    from embedlab.cli import methods

    def broken() -> list:
        raise bug

    monkeypatch.setattr(methods, "method_rows", broken)
    assert main(["methods"]) == 1
    message = str(bug.args[0])
    assert capsys.readouterr().err.strip() == (
        f"embedlab methods: error: {type(bug).__name__}: {message} (EMBEDLAB_DEBUG=1 shows the traceback)")
    assert main(["similarity", "minilm:pool=sideways", "a", "b"]) == 2  # a bad spec: the user's input


# Signs of internals in help text: reStructuredText markup, class names, Python values, argparse details.
INTERNALS = (r"``", r":(func|mod|class|meth|data|attr):`", r"ResultsDB", r"default path", r"\bNone\b", r"Namespace",
             r"\bdest\b", r"%\(", r"\bself\b", r"__")


def test_help_text_is_written_for_users():
    import re

    from embedlab.cli.app import leaf_parsers

    parser = build_parser()
    commands = leaf_parsers(parser)
    # every command is reached, nested ones (mlm-head train, cache info) included
    assert {"embed", "eval", "report", "mlm-head train", "cache info"} <= {command.prog.removeprefix("embedlab ") for command in commands}
    texts = [parser.format_help()] + [command.format_help() for command in commands]
    for text in texts:
        for pattern in INTERNALS:
            assert not re.search(pattern, text), f"help shows {pattern!r}:\n{text}"


def test_every_command_takes_quiet_and_the_shared_format():
    from embedlab.cli.app import leaf_parsers
    from embedlab.results.tables import render

    for command in leaf_parsers(build_parser()):
        options = {option: action for action in command._actions for option in action.option_strings}
        assert "--quiet" in options, command.prog
        if "--format" in options:
            assert tuple(options["--format"].choices) == ("table", "markdown", "json", "csv"), command.prog
    for output_format in ("table", "markdown", "json", "csv"):  # the CLI's choices are what the formatter renders
        assert render(["a"], [[1]], output_format)
    with_format = {c.prog.split(" ", 1)[1] for c in leaf_parsers(build_parser()) if "--format" in c.format_help()}
    assert {"eval", "results", "alignsim", "methods", "explain"} <= with_format


def _piped(arguments: list[str], tmp_path: Path, fresh: bool = False) -> subprocess.CompletedProcess:
    """``python -m embedlab ARGS`` with stdout and stderr piped (not terminals), as in ``embedlab ... | head``;
    ``fresh``: a new interpreter, not a child of the preloaded one (tests/preloaded.py), so that anything
    printed while torch and transformers are imported would be on its stderr."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
                   "EMBEDLAB_CACHE": str(tmp_path / "cache")}
    start = subprocess.run if fresh else preloaded.run
    return start([sys.executable, "-m", "embedlab", *arguments], capture_output=True, text=True, env=environment,
                 cwd=tmp_path, timeout=300)


def test_piped_output_holds_only_results_and_quiet_silences_progress(tmp_path, sts_test_rows):
    import csv
    import io

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{gold}\n" for gold, a, b in sts_test_rows[:40]))
    arguments = ["eval", "minilm", "--tasks", f"sts:@{pairs}", "--no-db", "--format", "csv"]
    forced = _piped(arguments + ["--progress"], tmp_path)  # bars forced on although stderr is a pipe
    assert forced.returncode == 0, forced.stderr
    rows = list(csv.DictReader(io.StringIO(forced.stdout)))
    assert {row["metric"] for row in rows} == {"spearman", "pearson", "kendall_b", "kendall_c"}
    assert all(row["unit"] == "correlation" and -1 <= float(row["value"]) <= 1 for row in rows)
    assert len(forced.stdout.splitlines()) == len(rows) + 1  # a header and the records: no bar fragments
    assert "\r" not in forced.stdout and "it/s" not in forced.stdout
    assert "tasks: 100%" in forced.stderr and "token states" in forced.stderr and "done sts/pairs@" in forced.stderr
    plain = _piped(arguments, tmp_path)  # stderr is not a terminal: status lines only, no bars
    assert plain.stdout == forced.stdout and "run sts/pairs@" in plain.stderr and "%|" not in plain.stderr
    quiet = _piped(arguments + ["--progress", "--quiet"], tmp_path, fresh=True)  # nothing at all on stderr
    assert quiet.returncode == 0 and quiet.stdout == forced.stdout and quiet.stderr == ""


def test_old_option_names_still_work_but_are_not_shown():
    parser = build_parser()
    assert parser.parse_args(["report", "--output", "r.html"]).out == "r.html"
    assert str(parser.parse_args(["alignsim", "minilm", "--output", "folder"]).out) == "folder"
    assert parser.parse_args(["mlm-head", "train", "minilm", "--no-progress"]).quiet
    from embedlab.cli.app import leaf_parsers

    helps = {c.prog: c.format_help() for c in leaf_parsers(parser)}
    assert "--output" not in helps["embedlab report"] and "--output" not in helps["embedlab alignsim"]
    assert "--no-progress" not in helps["embedlab mlm-head train"]


def test_building_the_parser_imports_no_model_or_learning_library():
    """Every command starts by parsing its arguments; a usage error, `--help` or `--version` must not pay
    for torch, transformers, scikit-learn or scipy (about 4 s a start when the parser imported them)."""
    code = ("import sys\nfrom embedlab.cli.app import build_parser\nbuild_parser()\n"
            "print(sorted({name.split('.')[0] for name in sys.modules} & {'torch', 'transformers', 'sklearn', 'scipy'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(Path(embedlab.__file__).resolve().parent.parent)})
    assert result.stdout.strip() == "[]", result.stdout
