"""embedlab/cli/serve.py: the command's options and its refusals, all before any socket is opened."""

from __future__ import annotations

import socket

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


@pytest.mark.parametrize("arguments, environment, message", [
    (["--api-key", ""], None, "--api-key is empty"),
    (["--api-key", " key"], None, "--api-key: a key must be visible ASCII without spaces"),
    (["--api-key", "two words"], None, "--api-key: a key must be visible ASCII"),
    ([], "", "EMBEDLAB_API_KEY is empty"),
    ([], "key\n", "EMBEDLAB_API_KEY: a key must be visible ASCII"),
])
def test_keys_no_client_could_send_are_refused(arguments, environment, message, monkeypatch, capsys) -> None:
    if environment is None:
        monkeypatch.delenv("EMBEDLAB_API_KEY", raising=False)
    else:
        monkeypatch.setenv("EMBEDLAB_API_KEY", environment)
    # a spec that names no installed model: the key is judged before any model loads (or any socket opens)
    assert main(["serve", "no-such-model-anywhere", "--port", "0", *arguments]) == 2
    assert message in capsys.readouterr().err


def test_max_wait_is_bounded() -> None:
    assert build_parser().parse_args(["serve", "minilm", "--max-wait-ms", "1000"]).max_wait_ms == 1000
    for wait in ("1e9", "1001", "inf", "nan"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["serve", "minilm", "--max-wait-ms", wait])


def test_a_port_in_use_or_a_foreign_host_is_named_before_any_model_loads_and_an_open_network_host_warns(monkeypatch, capsys) -> None:
    monkeypatch.delenv("EMBEDLAB_API_KEY", raising=False)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        # a spec that names no installed model: had it been loaded first, that would be the error
        assert main(["serve", "no-such-model-anywhere", "--host", "0.0.0.0", "--port", str(port)]) == 2
    error = capsys.readouterr().err
    assert f"--port {port}: the port is in use on 0.0.0.0" in error
    assert "warning: --host 0.0.0.0 without --api-key" in error
    assert main(["serve", "no-such-model-anywhere", "--host", "203.0.113.7", "--port", "0"]) == 2  # TEST-NET-3: not this machine's
    assert "--host 203.0.113.7: not an address of this machine" in capsys.readouterr().err
