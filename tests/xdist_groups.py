"""``--dist loadgroup`` for pytest 9.2: send every test marked ``xdist_group(NAME)`` to one worker.

pytest-xdist 3.8 groups a test by appending ``@NAME`` to ``item._nodeid`` on the worker; pytest 9.2 keeps a
node's id in ``item._id`` (a ``NodeId``) and no longer reads ``_nodeid``, so the suffix is lost and the
scheduler spreads a group over both workers without a word (two Ray clusters at once). This hook adds the
suffix where xdist's did not take, the way xdist names it (group names sorted, joined by ``_``).
"""

from __future__ import annotations

import pytest


def group_suffix(item: pytest.Item) -> str:
    """``@NAME`` for a test marked ``xdist_group(NAME)`` (``@A_B`` for two groups), "" for others."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    return "@" + "_".join(names) if names else ""


@pytest.hookimpl(trylast=True)  # after xdist's own hook: where that one worked, there is nothing to do
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set by xdist on its workers under --dist loadgroup
        return
    for item in items:
        suffix = group_suffix(item)
        if suffix and not item.nodeid.endswith(suffix):
            if hasattr(item, "_id"):  # pytest ≥ 9.2: the id is a NodeId whose text is cached as parsed
                from _pytest.nodeid import NodeId

                item._id = NodeId.parse(item.nodeid + suffix)
            else:
                item._nodeid = item.nodeid + suffix
