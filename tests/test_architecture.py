"""The architecture rules of docs/architecture.md, checked on the source.

* Every import follows the package table of docs/architecture.md: a module imports its own package, the
  packages its row's "may import" column names (a dotted name such as ``methods.base`` allows that module
  only), and ``embedlab/errors.py``. The top-level ``embedlab`` package is a row like any other (only
  ``cli`` may import it), so no arrow runs back up to it. The table is read from the document, so the
  document is the rule.
* No import cycle between files: the module-level imports, ``if TYPE_CHECKING:`` blocks included (imports
  inside functions excluded), form no cycle. A package ``__init__`` may resolve names lazily through a
  module-level ``__getattr__`` (PEP 562) so that importing a light module does not import heavy
  libraries; such an import names a module of its own package only.
* Every name is imported from the module that defines it (package, tests, benchmarks and scripts alike): no
  module or package passes on a name it imported, except the package root's public ``embedlab.load``,
  ``embedlab.bertscore`` and ``__version__``.
* No module over 400 lines and no function over 60 lines, except the ones listed below (being split).
* ``os.environ`` only in ``runtime/settings.py``, ``tqdm`` only in ``runtime/progress.py``.
* No ``importlib`` for internal code.
* No module-level mutable state outside the ``embedlab/runtime/`` package: no ``lru_cache``/``functools.cache``,
  and no empty module-level containers (memos live in ``runtime.memo``).
* Scripts and benchmarks use public API only: no ``embedlab...._private`` names.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import embedlab

PACKAGE = Path(embedlab.__file__).resolve().parent
REPO = PACKAGE.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


MODULES: dict[str, Path] = {_module_name(path): path for path in _sources()}


def _unit(module: str) -> str:
    """The row of the package table a dotted module name belongs to (``embedlab.tokens.store`` → ``tokens``)."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def _row_units(cell: str) -> list[str]:
    """``embedlab/tokens/``, ``embedlab/spec.py`` … → ``tokens``, ``spec`` …"""
    return [re.sub(r"(\.py|/)$", "", path.removeprefix("embedlab/")) for path in re.findall(r"`(embedlab/[^`]*)`", cell)]


def _allowed_cell(cell: str) -> set[str]:
    """The "may import" column: comma-separated dotted names, each optionally followed by a note in
    parentheses; ``—`` for none, ``everything`` for every package."""
    text = re.sub(r"\([^)]*\)", "", cell).replace("`", "")
    names = {name.strip() for name in text.split(",")} - {"", "—", "-"}
    return {"*"} if "everything" in names else names


def _table() -> dict[str, set[str]]:
    """Each package table row of docs/architecture.md: unit → the dotted names it may import."""
    section = ARCHITECTURE.read_text().split("\n## Packages\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`embedlab"):
            for unit in _row_units(cells[0]):
                assert unit not in rows, f"docs/architecture.md lists {unit} twice"
                rows[unit] = _allowed_cell(cells[2])
    return rows


TABLE = _table()


def _resolve(node: ast.ImportFrom | ast.Import, module: str, path: Path) -> list[str]:
    """The embedlab modules an import statement names: ``from a.b import c`` names the module ``a.b.c``
    when that is a file or package, else ``a.b``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "embedlab"]
    base = node.module or ""
    if node.level:  # relative: from the importing module's package
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
    if base.split(".")[0] != "embedlab":
        return []
    return sorted({f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names})


def _module_level_imports(statements: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Imports at module level: top-level ones and those in top-level blocks (``if TYPE_CHECKING:`` included:
    a type-checking import is an arrow of the design too) and class bodies; not those inside functions."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                found += _module_level_imports([child for child in getattr(node, field, []) if isinstance(child, ast.AST)])
    return found


@functools.cache  # each file is parsed once for all the checks (the trees are only read)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _allows(unit: str, target: str) -> bool:
    if target == "embedlab.errors" or _unit(target) == unit:  # docs: any module may import the error types
        return True
    allowed = TABLE[unit]
    return "*" in allowed or any(target == f"embedlab.{name}" or target.startswith(f"embedlab.{name}.") for name in allowed)


def test_the_table_names_every_package_once_and_nothing_else() -> None:
    units = {_unit(module) for module in MODULES}
    assert units <= set(TABLE), f"packages missing from the table of docs/architecture.md: {sorted(units - set(TABLE))}"
    assert set(TABLE) <= units, f"the table of docs/architecture.md names packages that do not exist: {sorted(set(TABLE) - units)}"
    named = {name.split(".")[0] for allowed in TABLE.values() for name in allowed} - {"*"}
    assert named <= units, f"the may-import column names unknown packages: {sorted(named - units)}"


def test_the_table_itself_has_no_cycle() -> None:
    """Data flows one way: the may-import relation between packages is a partial order."""
    graph = {unit: {name.split(".")[0] for name in allowed if name != "*"} for unit, allowed in TABLE.items()}
    cycles = _cycles(graph)
    assert not cycles, "docs/architecture.md's table allows cycles between packages: " + "; ".join(" → ".join(c) for c in cycles)


@pytest.mark.parametrize("path", _sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_imports_follow_the_documented_table(path: Path) -> None:
    module = _module_name(path)
    unit = _unit(module)
    wrong = [f"line {node.lineno}: {target} (the {unit} row of docs/architecture.md does not allow {_unit(target)})"
             for node in ast.walk(_tree(path)) if isinstance(node, (ast.Import, ast.ImportFrom))
             for target in _resolve(node, module, path) if not _allows(unit, target)]
    assert not wrong, f"{path.relative_to(REPO)} imports against the table:\n" + "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_files() -> None:
    graph = {module: {target for node in _module_level_imports(_tree(path).body) for target in _resolve(node, module, path)
                      if target in MODULES and target != module}
             for module, path in MODULES.items()}
    cycles = _cycles(graph)
    assert not cycles, "module-level imports form cycles:\n" + "\n".join(" ↔ ".join(cycle) for cycle in cycles)


def test_a_type_checking_import_is_an_arrow_and_nothing_imports_the_package_root() -> None:
    """The two holes the checks had: a circle closed under ``if TYPE_CHECKING:`` and an arrow back up to the root."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from embedlab.pooling.pipeline import P\n"
                     "def f():\n    from embedlab.registry import load\n")
    found = [target for node in _module_level_imports(tree.body) for target in _resolve(node, "embedlab.pooling.x", PACKAGE / "pooling" / "x.py")]
    assert found == ["embedlab.pooling.pipeline"]  # the function's import is not module level
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert not _allows("matching", "embedlab") and not _allows("engines", "embedlab") and _allows("cli", "embedlab")


@functools.cache
def _top_level_names(path: Path) -> tuple[set[str], dict[str, str]]:
    """What a module defines at its top level (``if``/``try`` blocks included), and what it imports there
    (name → the module it comes from)."""
    defined: set[str] = set()
    imported: dict[str, str] = {}
    statements = list(_tree(path).body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.If, ast.Try)):
            statements += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                           *(statement for handler in getattr(node, "handlers", []) for statement in handler.body)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            imported |= {alias.asname or alias.name: node.module or "." for alias in node.names}
        elif isinstance(node, ast.Import):
            imported |= {(alias.asname or alias.name).split(".")[0]: alias.name for alias in node.names}
    return defined, imported


PUBLIC_ROOT_NAMES = {"load", "bertscore", "__version__"}  # embedlab's public surface (``embedlab.load(spec)``)


def _passed_on(importer: ast.ImportFrom) -> list[str]:
    """The names ``importer`` takes from an embedlab module that does not define them but imports them."""
    if importer.level or not importer.module or not importer.module.startswith("embedlab"):
        return []
    source = MODULES.get(importer.module)
    if source is None:
        return []
    defined, imported = _top_level_names(source)
    folder = source.parent if source.name == "__init__.py" else None
    found = []
    for alias in importer.names:
        submodule = folder is not None and (folder.joinpath(f"{alias.name}.py").exists() or folder.joinpath(alias.name).is_dir())
        public = importer.module == "embedlab" and alias.name in PUBLIC_ROOT_NAMES
        if alias.name in imported and alias.name not in defined and not submodule and not public:
            found.append(f"{alias.name} (from {importer.module}, which imports it from {imported[alias.name]})")
    return found


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    """No re-export shims: an import line says where the name lives (package, tests, benchmarks, scripts)."""
    files = sorted([*_sources(), *REPO.joinpath("tests").rglob("*.py"), *REPO.joinpath("benchmarks").glob("*.py"),
                    *REPO.joinpath("scripts").glob("*.py")])
    passed_on = [f"{path.relative_to(REPO)}:{node.lineno}: {name}" for path in files for node in ast.walk(_tree(path))
                 if isinstance(node, ast.ImportFrom) for name in _passed_on(node)]
    assert not passed_on, "names imported from a module that only passes them on:\n" + "\n".join(passed_on)


def test_the_re_export_check_sees_a_shim() -> None:
    """The check itself: a name the runtime settings import from errors is flagged, a submodule and a name the
    module defines are not."""
    flagged = _passed_on(ast.parse("from embedlab.runtime.settings import InputError, cache_dir").body[0])
    assert flagged == ["InputError (from embedlab.runtime.settings, which imports it from embedlab.errors)"]
    assert _passed_on(ast.parse("from embedlab.runtime import settings").body[0]) == []
    assert _passed_on(ast.parse("from embedlab import load, __version__").body[0]) == []


@pytest.mark.parametrize("path", [path for path in _sources() if path.name == "__init__.py"], ids=lambda path: str(path.relative_to(REPO)))
def test_lazy_package_attributes_import_their_own_package_only(path: Path) -> None:
    """A package's PEP 562 ``__getattr__`` resolves its own modules' names on first use, nothing else."""
    module = _module_name(path)
    getters = [node for node in _tree(path).body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
    foreign = [f"line {node.lineno}: {target}" for getter in getters for node in ast.walk(getter)
               if isinstance(node, (ast.Import, ast.ImportFrom)) for target in _resolve(node, module, path)
               if not target.startswith(f"{module}.")]
    assert not foreign, f"{path.relative_to(REPO)}'s __getattr__ imports outside its package:\n" + "\n".join(foreign)


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((prefix + node.name, node))
            found += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        else:
            found += _functions(node, prefix)
    return found


def test_modules_and_functions_stay_small() -> None:
    long_modules, long_functions = set(), set()
    for path in _sources():
        name = str(path.relative_to(REPO))
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.add(name)
        for qualified, node in _functions(ast.parse(text)):
            if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long_functions.add(f"{name}::{qualified}")
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines (split them by job): {sorted(long_modules)}"
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {sorted(long_functions)}"


# the one module allowed to use each: settings are read in one place, every bar is drawn by one module
SOLE_USERS = {"os.environ": "embedlab/runtime/settings.py", "os.getenv": "embedlab/runtime/settings.py",
              "tqdm": "embedlab/runtime/progress.py"}


@pytest.mark.parametrize("name", sorted(SOLE_USERS))
def test_environment_and_progress_bars_have_one_owner(name: str) -> None:
    users = sorted(str(path.relative_to(REPO)) for path in _sources() if name in path.read_text())
    assert set(users) <= {SOLE_USERS[name]}, f"{name} outside {SOLE_USERS[name]}: {users}"


@pytest.mark.parametrize("path", _sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_importlib_and_no_hidden_process_state(path: Path) -> None:
    if path.is_relative_to(PACKAGE / "runtime"):
        return
    tree = _tree(path)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("lru_cache", "cache") and getattr(node.value, "id", "") == "functools":
            problems.append(f"line {node.lineno}: functools.{node.attr} (use runtime.memo.cached)")
        if isinstance(node, ast.ImportFrom) and node.module == "functools" and {"lru_cache", "cache"} & {a.name for a in node.names}:
            problems.append(f"line {node.lineno}: from functools import lru_cache/cache (use runtime.memo.cached)")
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
