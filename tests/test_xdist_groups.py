"""tests/xdist_groups.py: under ``-n 2 --dist loadgroup`` a group's tests all run on one worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os, time, pytest
pytestmark = pytest.mark.xdist_group("cluster")

@pytest.mark.parametrize("index", range(6))
def test_grouped(index, request):
    time.sleep(0.2)  # long enough that a free worker would take the next one, were the group not held
    with open(os.environ["WORKERS_LOG"], "a") as log:
        log.write(f"{request.node.nodeid} {os.environ['PYTEST_XDIST_WORKER']}\\n")
'''

FREE = '''
import os

def test_free_one(request):
    with open(os.environ["WORKERS_LOG"], "a") as log:
        log.write(f"{request.node.nodeid} {os.environ['PYTEST_XDIST_WORKER']}\\n")
'''


def test_a_group_runs_on_one_worker_and_is_named_as_xdist_names_it(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["xdist_groups"]\n')
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_free.py").write_text(FREE)
    log = tmp_path / "workers.log"
    environment = {**os.environ, "WORKERS_LOG": str(log),
                   "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                             "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                            cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in log.read_text().splitlines()]
    grouped = {worker for nodeid, worker in rows if "test_grouped" in nodeid}
    assert len([row for row in rows if "test_grouped" in row[0]]) == 6
    assert len(grouped) == 1, rows
    assert all(nodeid.endswith("@cluster") for nodeid, _ in rows if "test_grouped" in nodeid)
    assert not any("@" in nodeid for nodeid, _ in rows if "test_free" in nodeid)
