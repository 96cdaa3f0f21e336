"""The architecture rules of docs/architecture.md, checked on the source (issue 15's done-when).

* Data flows one way: a module imports only from its own package or from packages to its left in
  ``LAYERS`` (``methods.registry`` sits above the family packages it lists; ``cli`` sits on top).
* No ``importlib`` for internal code.
* No module-level mutable state outside ``embedlab/runtime.py``: no ``lru_cache``/``functools.cache``,
  and no module-level dict/list/set assignments whose name says they are memos or stores.
* Scripts and benchmarks use public API only: no ``embedlab...._private`` names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import embedlab

PACKAGE = Path(embedlab.__file__).resolve().parent
REPO = PACKAGE.parent

# left to right = the data flow; a module may import its own package and anything to its left
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("runtime", "spec"),
    ("models", "data"),
    ("tokens",),
    ("pooling",),
    ("methods",),
    ("neural", "matching"),
    ("methods.registry",),
    ("training", "interop"),
    ("evaluation",),
    ("results",),
    ("engines",),
    ("cli", "__init__"),
    ("__main__",),
)


def _unit(module: str) -> str:
    """The architectural unit of a dotted module name below ``embedlab``."""
    parts = module.split(".")[1:] or ["__init__"]
    if parts[:2] == ["methods", "registry"]:
        return "methods.registry"
    return parts[0]


def _rank(unit: str) -> int:
    for rank, units in enumerate(LAYERS):
        if unit in units:
            return rank
    raise AssertionError(f"{unit!r} is in no layer of tests/test_architecture.py: add it where it belongs")


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("embedlab"):
            names = [node.module] if node.module != "embedlab" else [
                f"embedlab.{alias.name}" if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file() else "embedlab"
                for alias in node.names]
            found += [(name, node.lineno) for name in names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("embedlab")]
    return found


@pytest.mark.parametrize("path", _sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_imports_follow_the_data_flow(path: Path) -> None:
    own = _unit(_module_name(path))
    upward = []
    for imported, line in _imports(ast.parse(path.read_text(), str(path))):
        target = _unit(imported)
        if target != own and target != "__init__" and _rank(target) >= _rank(own):
            upward.append(f"line {line}: {imported} ({target} is not left of {own})")
    assert not upward, f"{path.relative_to(REPO)} imports against the data flow:\n" + "\n".join(upward)


@pytest.mark.parametrize("path", _sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_importlib_and_no_hidden_process_state(path: Path) -> None:
    if path.name == "runtime.py":
        return
    tree = ast.parse(path.read_text(), str(path))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("lru_cache", "cache") and getattr(node.value, "id", "") == "functools":
            problems.append(f"line {node.lineno}: functools.{node.attr} (use runtime.cached)")
        if isinstance(node, ast.ImportFrom) and node.module == "functools" and {"lru_cache", "cache"} & {a.name for a in node.names}:
            problems.append(f"line {node.lineno}: from functools import lru_cache/cache (use runtime.cached)")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(name and name.startswith("importlib") and name != "importlib.metadata" for name in names):
                problems.append(f"line {node.lineno}: importlib (import modules explicitly)")
    for node in tree.body:  # module-level statements only: an empty container is a memo in waiting
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        empty_literal = isinstance(value, (ast.List, ast.Set)) and not value.elts or isinstance(value, ast.Dict) and not value.keys
        empty_call = (isinstance(value, ast.Call) and not value.args and not value.keywords
                      and getattr(value.func, "id", getattr(value.func, "attr", "")) in ("dict", "list", "set", "OrderedDict", "defaultdict"))
        if empty_literal or empty_call:
            names = ", ".join(getattr(target, "id", "?") for target in targets)
            problems.append(f"line {node.lineno}: empty module-level container {names} (a memo? use runtime.memo)")
    assert not problems, f"{path.relative_to(REPO)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", sorted([*REPO.joinpath("scripts").glob("*.py"), *REPO.joinpath("benchmarks").glob("*.py")]),
                         ids=lambda path: str(path.relative_to(REPO)))
def test_scripts_and_benchmarks_use_public_api_only(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    embedlab_names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                      and node.module and node.module.startswith("embedlab") for alias in node.names}
    embedlab_names |= {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                       for alias in node.names if alias.name.startswith("embedlab")}
    private = [f"line {node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
               and isinstance(node.value, ast.Name) and node.value.id in embedlab_names]
    private += [f"line {node.lineno}: from {node.module} import {alias.name}" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("embedlab")
                for alias in node.names if alias.name.startswith("_")]
    assert not private, f"{path.relative_to(REPO)} reaches into embedlab's private names:\n" + "\n".join(private)
