"""The shape of the code, read statically with `ast` (nothing is imported): no import cycles,
no private names borrowed across modules, small modules and functions, lazy imports that say
why they are lazy."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Package name -> its folder (the command line lives in cli/ but is installed as fieldgen.cli).
PACKAGES = {"fieldgen": ROOT / "fieldgen", "fieldgen.cli": ROOT / "cli"}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
LAZY_MARK = "# lazy:"

#: (path, function or None for the module's length) -> why it may be longer.
SIZE_ALLOWED = {
    ("fieldgen/runtime/contact/drake_arithmetic.py", "tet_tet_polygons"):
        "one numba kernel following Drake's tet-tet query step by step; split, it would no longer read alongside it",
    ("fieldgen/runtime/contact/drake_tri_tet.py", "tri_tet_polygons"):
        "one numba kernel following Drake's triangle-tet query step by step",
}
#: Underscore names of other packages that are documented public API.
PRIVATE_ALLOWED = {
    "os._exit": "documented: leave a worker process at once, without running its parent's handlers",
}


@dataclass(frozen=True)
class Module:
    name: str          #: dotted, e.g. fieldgen.batch.run
    path: Path
    tree: ast.Module
    lines: list[str]

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def relative(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Import:
    module: str        #: the importer
    line: int
    target: str        #: the module imported from, absolute (``a.b`` for ``from a.b import c``)
    names: tuple[str, ...]   #: the names of a ``from`` import; empty for ``import a.b``
    in_function: bool
    bound: tuple[str, str] | None = None   #: ``import a.b as x`` binds (x, a.b); ``import a.b`` (a, a)


def read_modules() -> dict[str, Module]:
    modules = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            text = path.read_text(encoding="utf-8")
            modules[name] = Module(name, path, ast.parse(text, filename=str(path)), text.splitlines())
    return modules


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name if module.is_package else module.name.rsplit(".", 1)[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _function_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes that sit inside a function body."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def imports_of(module: Module) -> list[Import]:
    inside = _function_nodes(module.tree)
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound = (alias.asname, alias.name) if alias.asname else (top, top)
                found.append(Import(module.name, node.lineno, alias.name, (), id(node) in inside, bound))
        elif isinstance(node, ast.ImportFrom):
            found.append(Import(module.name, node.lineno, _absolute(module, node),
                                tuple(a.name for a in node.names), id(node) in inside))
    return found


def _owner(target: str, modules: dict[str, Module]) -> str | None:
    """The deepest of ``modules`` that ``target`` names (``a.b`` for ``a.b.c`` when c is not one)."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Module -> the modules it imports (at the top or inside functions); ``from pkg import name``
    is an edge to ``pkg.name`` when that is a module, else to ``pkg``."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module in modules.values():
        for imported in imports_of(module):
            for name in imported.names or ("",):
                submodule = f"{imported.target}.{name}"
                owner = submodule if submodule in modules else _owner(imported.target, modules)
                if owner is not None and owner != module.name:
                    graph[module.name].add(owner)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph`` (iterative), each sorted; singletons only with a self-edge."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    return sorted(components)


def cycle_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One cycle inside a strongly connected ``component``, from its first member back to it."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child == start:
                    return paths[node] + [start]
                if child in members and child not in paths:
                    paths[child] = paths[node] + [child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    return [" -> ".join(cycle_through(c, graph)) for c in strongly_connected(graph)]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _top(name: str) -> str:
    return name.split(".")[0]


def _attribute_chains(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """Every outermost ``a.b.c`` chain of plain names, as (line, [a, b, c])."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts, value = [], node
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                chains.append((node.lineno, [value.id, *reversed(parts)]))
    return chains


def _bindings(module: Module) -> dict[str, str]:
    """Name in ``module`` -> the dotted module or name it was imported as."""
    bound = {}
    for imported in imports_of(module):
        if imported.bound is not None:
            bound[imported.bound[0]] = imported.bound[1]
        for name in imported.names:
            bound[name] = f"{imported.target}.{name}"
    return bound


def _private_path(module: Module, dotted: str) -> bool:
    """``dotted`` (a module, or a name in one) has a private part and is not ``module``'s own name."""
    if dotted in PRIVATE_ALLOWED or not any(_private(s) for s in dotted.split(".")[1:]):
        return False
    return dotted.rsplit(".", 1)[0] != module.name


def private_uses(module: Module) -> list[str]:
    """Private modules or names of another top-level package, and private names of another
    fieldgen module, that ``module`` reaches: by import or as an attribute of an imported module."""
    found = []
    for imported in imports_of(module):
        for dotted in [f"{imported.target}.{n}" for n in imported.names] or [imported.target]:
            if _private_path(module, dotted):
                found.append(f"{module.relative}:{imported.line} imports {dotted}")
    bound = _bindings(module)
    for line, chain in _attribute_chains(module.tree):
        if chain[0] in bound and _private_path(module, ".".join([bound[chain[0]], *chain[1:]])):
            found.append(f"{module.relative}:{line} uses {'.'.join([bound[chain[0]], *chain[1:]])}")
    return found


def size_violations(module: Module) -> list[str]:
    found = []
    if len(module.lines) > MAX_MODULE_LINES and (module.relative, None) not in SIZE_ALLOWED:
        found.append(f"{module.relative}: {len(module.lines)} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and (module.relative, node.name) not in SIZE_ALLOWED:
                found.append(f"{module.relative}:{node.lineno} {node.name}: {length} lines "
                             f"(at most {MAX_FUNCTION_LINES})")
    return found


def _has_reason(line: str) -> bool:
    """The line carries ``# lazy: <why>`` with a reason after the colon."""
    mark = line.find(LAZY_MARK)
    return mark >= 0 and bool(line[mark + len(LAZY_MARK):].strip())


def _marked(lines: list[str], line: int) -> bool:
    """Line ``line`` (1-based) carries the mark, or a comment line with it heads the block of
    import lines it stands in (one reason for a run of imports)."""
    if _has_reason(lines[line - 1]):
        return True
    index = line - 2
    while index >= 0 and lines[index].strip().startswith(("from ", "import ")):
        index -= 1
    return index >= 0 and lines[index].strip().startswith(LAZY_MARK) and _has_reason(lines[index])


def unmarked_lazy_imports(module: Module) -> list[str]:
    found = []
    for imported in imports_of(module):
        if not imported.in_function:
            continue
        if not _marked(module.lines, imported.line):
            found.append(f"{module.relative}:{imported.line} imports {imported.target} inside a function "
                         f"without a '{LAZY_MARK} <why>' comment")
    return found


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return read_modules()


def _report(title: str, found: list[str]) -> str:
    return f"{len(found)} {title}:\n  " + "\n  ".join(found)


# ----------------------------------------------------------------------------- the checker itself

def test_the_cycle_finder_finds_cycles_and_only_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert import_cycles(graph) == ["a -> b -> c -> a", "e -> e"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    two = {"x": {"y"}, "y": {"x", "z"}, "z": {"w"}, "w": {"z"}}
    assert import_cycles(two) == ["w -> z -> w", "x -> y -> x"]


def test_a_lazy_mark_covers_its_block_of_imports_only():
    lines = ["def f():", "    # lazy: heavy", "    from a import b", "    import c", "", "    import d",
             "    x = 1  # lazy: not a comment line", "    import e"]
    assert [_marked(lines, n) for n in (3, 4, 6, 8)] == [True, True, False, False]


def test_the_graph_resolves_relative_and_function_imports():
    source = "import os\nfrom . import b\n\n\ndef f():\n    from .c import g  # lazy: reason\n"
    tree = ast.parse(source)
    a = Module("pkg.a", ROOT / "pkg" / "a.py", tree, source.splitlines())
    modules = {name: Module(name, ROOT / "pkg" / "x.py", ast.parse(""), []) for name in ("pkg", "pkg.b", "pkg.c")}
    modules["pkg.a"] = a
    assert import_graph(modules)["pkg.a"] == {"pkg.b", "pkg.c"}
    assert [i.in_function for i in imports_of(a)] == [False, False, True]
    assert unmarked_lazy_imports(a) == []
    bare = Module("pkg.a", ROOT / "pkg" / "a.py", tree, source.replace("# lazy: reason", "# lazy:").splitlines())
    assert [f.split(" ", 1)[1] for f in unmarked_lazy_imports(bare)] == [
        "imports pkg.c inside a function without a '# lazy: <why>' comment"]


def test_the_private_check_sees_imports_and_attributes():
    source = ("import os\nimport meshio\nimport numpy as np\nimport fieldgen.b as b\nfrom meshio._helpers import read\n"
              "from fieldgen.b import _hidden\nfrom fieldgen.a import _mine\nfrom .c import _theirs\n"
              "x = meshio._helpers.y + np.pi + np.__version__ + b._z + b.w + os._exit\n")
    module = Module("fieldgen.a", ROOT / "fieldgen" / "a.py", ast.parse(source), source.splitlines())
    found = private_uses(module)
    assert sorted(f.split(" ", 1)[1] for f in found) == [
        "imports fieldgen.b._hidden", "imports fieldgen.c._theirs", "imports meshio._helpers.read", "uses fieldgen.b._z",
        "uses meshio._helpers.y"]


# ----------------------------------------------------------------------------- the code

def test_the_graph_covers_the_library_and_the_command_line(modules):
    graph = import_graph(modules)
    assert "fieldgen.cli.main" in graph and "fieldgen.runtime.contact.clip" in graph
    assert {"fieldgen.cli.batch", "fieldgen.cli.common"} <= graph["fieldgen.cli.main"] | graph["fieldgen.cli.batch"]


def test_no_import_cycles(modules):
    cycles = import_cycles(import_graph(modules))
    assert not cycles, _report("import cycles", cycles)


def test_no_private_names_across_modules(modules):
    found = [f for module in modules.values() for f in private_uses(module)]
    assert not found, _report("private modules or names used across modules", found)


def test_modules_and_functions_are_small(modules):
    found = [f for module in modules.values() for f in size_violations(module)]
    assert not found, _report("too long", found)


def test_function_imports_say_why_they_are_lazy(modules):
    found = [f for module in modules.values() for f in unmarked_lazy_imports(module)]
    assert not found, _report("unexplained imports inside functions", found)


def test_the_size_allowlist_is_still_needed(modules):
    """An allowlist entry whose module or function has become small (or gone) is removed."""
    by_path = {m.relative: m for m in modules.values()}
    stale = []
    for (path, function), _reason in SIZE_ALLOWED.items():
        module = by_path.get(path)
        if module is None:
            stale.append(f"{path} (gone)")
        elif function is None and len(module.lines) <= MAX_MODULE_LINES:
            stale.append(f"{path} ({len(module.lines)} lines)")
        elif function is not None and not any(
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function
                and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES for n in ast.walk(module.tree)):
            stale.append(f"{path} {function}")
    assert not stale, _report("allowlist entries no longer needed", stale)


if __name__ == "__main__":       # the current violations, one check after another
    found_modules = read_modules()
    checks = {
        "import cycles": import_cycles(import_graph(found_modules)),
        "private names": [f for m in found_modules.values() for f in private_uses(m)],
        "sizes": [f for m in found_modules.values() for f in size_violations(m)],
        "lazy imports without a reason": [f for m in found_modules.values() for f in unmarked_lazy_imports(m)],
    }
    for title, found in checks.items():
        print(_report(title, found), end="\n\n")
    sys.exit(1 if any(checks.values()) else 0)
