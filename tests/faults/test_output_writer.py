"""Every command that writes follows ``embed``'s output rules (issue 49, item 3): atomic files, a symlink at
the output replaced and never written through, the output never one of the inputs, one writer per folder,
a killed writer's leftovers removed on the next open, ``--overwrite`` removing only what a run wrote, and
``reproduce --recompute`` refusing an unwritable records folder before it computes."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from embedlab.cli.app import main
from embedlab.engines.shards import OutputFolder
from embedlab.errors import InputError
from embedlab.runtime.cache import atomic
from embedlab.runtime.outputs import check_output_file, output_folder


@pytest.fixture
def pairs(tmp_path) -> tuple[Path, Path]:
    cands, refs = tmp_path / "cands.txt", tmp_path / "refs.txt"
    cands.write_text("A man plays a guitar.\nThe cat sleeps.\n")
    refs.write_text("Someone plays music.\nA cat is asleep.\n")
    return cands, refs


def bertscore(cands: Path, refs: Path, out: Path) -> int:
    return main(["bertscore", "--cands", str(cands), "--refs", str(refs), "--layer", "1", "--out", str(out), "--quiet"])


def dead_pid() -> int:
    """The pid of a process that has exited (a writer killed mid-write)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_bertscore_out_replaces_a_symlink_and_leaves_its_target_alone(tmp_path, pairs, isolated_cache, minilm):
    target = tmp_path / "elsewhere.tsv"
    target.write_text("someone else's file\n")
    out = tmp_path / "scores.tsv"
    out.symlink_to(target)
    assert bertscore(*pairs, out) == 0
    assert target.read_text() == "someone else's file\n"
    assert not out.is_symlink() and out.read_text().startswith("line\tP\tR\tF1\n")


def test_bertscore_out_naming_an_input_is_refused_before_any_work(pairs, capsys):
    cands, refs = pairs
    before = cands.read_bytes()
    assert bertscore(cands, refs, cands.parent / "." / cands.name) == 2
    assert "is the input file" in capsys.readouterr().err
    assert cands.read_bytes() == before


def test_a_full_disk_keeps_the_old_bertscore_file_whole(tmp_path, pairs, isolated_cache, minilm, monkeypatch, capsys):
    out = tmp_path / "scores.tsv"
    out.write_text("the previous scores\n")

    def full(descriptor, buffers):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "writev", full)
    assert bertscore(*pairs, out) == 1
    assert "--out" in capsys.readouterr().err
    assert out.read_text() == "the previous scores\n"
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []


def test_a_second_writer_of_one_folder_is_refused(tmp_path):
    from filelock import FileLock

    out = tmp_path / "model"
    with FileLock(str(tmp_path / ".model.lock"), timeout=0):  # another export holds the folder
        with pytest.raises(InputError, match="another embedlab process is writing"):
            with output_folder(out):
                pass
    assert not out.exists()


def test_report_folders_of_reproduce_and_alignsim_refuse_a_second_writer(tmp_path):
    from filelock import FileLock

    from embedlab.results import alignsim_report
    from embedlab.results.reproduce import render

    for folder, write in ((tmp_path / "reproduce", lambda out: render.write_report(["matching"], out, command="test")),
                          (tmp_path / "alignsim", lambda out: alignsim_report.write_report([], out, [], {}))):
        with FileLock(str(folder.with_name(f".{folder.name}.lock")), timeout=0):  # another run writes there
            with pytest.raises(InputError, match="another embedlab process is writing"):
                write(folder)
        assert not folder.exists()
        report = write(folder)  # the lock is released: the rerun writes
        assert (report[0] if isinstance(report, tuple) else report).is_file()


def test_a_killed_writers_leftovers_do_not_block_the_rerun(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    pid = dead_pid()
    (out / f".model.safetensors.{pid}.1.0.tmp").write_bytes(b"half a file")  # an older export, written in place
    staging = tmp_path / f".model.{pid}.staging"
    staging.mkdir()
    (staging / "config.json").write_text("{")
    with output_folder(out) as folder:
        (folder / "config.json").write_text("{}\n")
    assert sorted(path.name for path in out.iterdir()) == ["config.json"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model"]


def test_a_failed_export_leaves_no_folder(tmp_path):
    out = tmp_path / "model"
    with pytest.raises(RuntimeError):
        with output_folder(out) as folder:
            (folder / "model.safetensors").write_bytes(b"part")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_export_static_fit_on_the_output_folder_is_refused(tmp_path):
    with pytest.raises(InputError, match="is the input"):
        with output_folder(tmp_path / "texts", inputs=(tmp_path / "texts",)):
            pass


def run_folder(folder: Path, spec: str, files: dict[str, bytes]) -> None:
    folder.mkdir()
    for name, payload in files.items():
        (folder / name).write_bytes(payload)
    (folder / "manifest.json").write_text(json.dumps({"layout": 1, "spec": spec, "complete": True,
                                                      "shards": [{"index": 0, "file": "shard-00000.parquet"}],
                                                      "fitted": []}))


def test_overwrite_removes_only_the_shards_the_manifest_lists(tmp_path):
    folder = tmp_path / "vectors"
    run_folder(folder, "minilm", {"shard-00000.parquet": b"x", "shard-final-report.parquet": b"mine"})
    assert OutputFolder(folder).prepare({"spec": "random:minilm"}, overwrite=True) is None
    assert sorted(path.name for path in folder.iterdir()) == ["shard-final-report.parquet"]


def test_overwrite_works_on_an_empty_manifest(tmp_path):
    folder = tmp_path / "vectors"
    folder.mkdir()
    (folder / "manifest.json").write_text("")
    (folder / "shard-00000.parquet").write_bytes(b"x")
    (folder / "shard-final-report.parquet").write_bytes(b"mine")
    with pytest.raises(InputError, match="--overwrite"):
        OutputFolder(folder).prepare({"spec": "minilm"}, overwrite=False)
    assert OutputFolder(folder).prepare({"spec": "minilm"}, overwrite=True) is None
    assert sorted(path.name for path in folder.iterdir()) == ["shard-final-report.parquet"]


def test_reproduce_recompute_refuses_an_unwritable_records_folder_before_computing(tmp_path, monkeypatch, capsys):
    from embedlab.results.reproduce import values

    monkeypatch.setattr(values, "RECORDS", Path("/proc/embedlab-records"))  # takes no file, even for root
    monkeypatch.setattr("embedlab.results.reproduce.recomputing.recompute", lambda *args, **kwargs: pytest.fail("computed"))
    # /proc answers ENOENT (exit 2), a read-only file system EROFS (exit 1): either way before any work
    assert main(["reproduce", "--recompute", "--paper", "pooling", "--out", str(tmp_path / "report")]) in (1, 2)
    assert "records file /proc/embedlab-records/pooling.jsonl" in capsys.readouterr().err


def test_reproduce_options_of_recompute_alone_are_refused(tmp_path, capsys):
    assert main(["reproduce", "--expensive", "--out", str(tmp_path / "report")]) == 2
    assert "--expensive only changes what --recompute computes" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def test_an_out_folder_that_takes_no_file_names_out(capsys):
    with pytest.raises(OSError, match="--out /proc/x.tsv cannot be written"):
        check_output_file(Path("/proc/x.tsv"))
    assert os.path.exists("/proc")


def test_embed_out_on_a_read_only_file_system_names_out(tmp_path, capsys):
    """sysfs takes no new files, even from root: the error names --out, not the probe file of the check."""
    texts = tmp_path / "texts.txt"
    texts.write_text("A dog runs.\n")
    assert main(["embed", "random:minilm", "--input", str(texts), "--out", "/sys/embedlab-vectors.npy", "--quiet"]) != 0
    error = capsys.readouterr().err
    assert "--out /sys/embedlab-vectors.npy cannot be written: /sys takes no new file" in error and "/tmp" not in error


def test_a_touched_input_resumes_and_a_changed_one_is_one_short_line(tmp_path):
    folder = tmp_path / "vectors"
    folder.mkdir()
    identity = {"path": "/data/texts.txt", "format": "txt", "size": 12, "mtime_ns": 1, "sha256": "a" * 64}
    (folder / "manifest.json").write_text(json.dumps({"layout": 1, "spec": "minilm", "input": identity,
                                                      "shards": [], "fitted": []}))
    touched = {**identity, "mtime_ns": 2}
    assert OutputFolder(folder).prepare({"spec": "minilm", "input": touched}, overwrite=False)["spec"] == "minilm"
    with pytest.raises(InputError) as caught:
        OutputFolder(folder).prepare({"spec": "minilm", "input": {**touched, "sha256": "b" * 64}}, overwrite=False)
    assert "input: sha256 'aaaaaaaaaaaa' there, 'bbbbbbbbbbbb' now" in str(caught.value)
    assert "mtime" not in str(caught.value) and len(str(caught.value)) < 250
