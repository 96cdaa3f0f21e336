import os
import stat

import pytest

from embedlab.runtime import atomic_write_bytes, data_path


def test_atomic_write_replaces_whole_files_with_ordinary_permissions(tmp_path):
    target = tmp_path / "sub" / "entry.bin"
    atomic_write_bytes(target, b"first")
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    assert list(target.parent.iterdir()) == [target]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_atomic_write_of_many_buffers_writes_them_in_order(tmp_path):
    import numpy as np

    array = np.arange(100_000, dtype=np.float32)
    buffers = [b"head", memoryview(array).cast("B"), b"", bytearray(b"tail")] * 300  # > IOV_MAX buffers
    target = tmp_path / "many.bin"
    atomic_write_bytes(target, buffers)
    assert target.read_bytes() == b"".join(bytes(buffer) for buffer in buffers)


def test_missing_data_names_the_path_and_root(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBEDLAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=f"data root searched: {tmp_path}"):
        data_path("sts", "nothing.txt")
