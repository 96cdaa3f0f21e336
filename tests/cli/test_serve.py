"""embedlab/cli/serve.py: the command's options and its refusals, all before any socket is opened."""

from __future__ import annotations

import pytest

from embedlab.cli.app import build_parser, main


def test_ports_and_defaults() -> None:
    args = build_parser().parse_args(["serve", "minilm", "--port", "0", "--name", "small=minilm"])
    assert (args.host, args.port, args.name, args.api_key, args.max_inputs) == ("127.0.0.1", 0, ["small=minilm"], None, 2048)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "minilm", "--port", "65536"])


@pytest.mark.parametrize("arguments, message", [
    (["serve"], "give at least one method spec"),
    (["serve", "minilm", "--fit-on", "texts.txt", "--fitted", "vectors"], "not both"),
    (["serve", "minilm", "--name", "small"], "ALIAS=SPEC"),
])
def test_refusals_exit_2_with_one_line(arguments, message, capsys) -> None:
    assert main(arguments) == 2
    error = capsys.readouterr().err
    assert error.startswith("embedlab serve: error: ") and message in error and error.count("\n") == 1
