"""The package's imports keep its floors: no cycle, and no floor importing a higher one.

Every ``import`` of ``distsort/`` is read with ``ast`` (function-local imports too, and
those under ``if TYPE_CHECKING:``), and the floors are read from the table of
``docs/architecture.md``, so the page and the test cannot disagree.  Importing a
submodule is an edge to that submodule, not to its package's ``__init__``.
"""
import ast
import re
from fnmatch import fnmatchcase
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "distsort"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Module groups that still import each other, each a strongly connected component of
#: the imports today.  Any other cycle fails ``test_no_new_cycle``; a group that grows
#: (a new module joins the cycle) fails too.
KNOWN_CYCLES: set[frozenset[str]] = set()
#: Imports of a higher floor that remain (importer, imported).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules():
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name, path, known):
    """The package's modules that ``name`` (at ``path``) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # ``from pkg import sub`` imports the submodule; ``from pkg import name`` the package
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            module = target
            while module and module not in known:  # ``import a.b.c`` of a non-module c
                module = module.rpartition(".")[0]
            if module.startswith("distsort") and module != name:
                found.add(module)
    return found


def import_graph():
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def floors():
    """``[(floor, [patterns])]`` from the table of docs/architecture.md, top floor first."""
    rows = re.findall(r"^\| *([a-z]+) *\| *(`distsort.*?) *\|$", ARCHITECTURE.read_text(), re.M)
    assert rows, "docs/architecture.md has no table of floors"
    return [(floor, re.findall(r"`([\w.*]+)`", names)) for floor, names in rows]


def floor_of(name, table):
    """The index of ``name``'s floor (0: the top); an exact name wins over a pattern."""
    for exact in (True, False):
        for i, (_, patterns) in enumerate(table):
            if any(p == name if exact else fnmatchcase(name, p) for p in patterns):
                return i
    return None


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return set(found)


def upward(graph, table):
    return {(a, b) for a, targets in graph.items() for b in targets
            if floor_of(b, table) < floor_of(a, table)}


def test_the_walk_sees_function_local_and_relative_imports():
    graph = import_graph()
    # from . import merge
    assert "distsort.backends.cpu.merge" in graph["distsort.backends.cpu.codes"]
    assert "distsort.api" in graph["distsort.cli.sort"] or "distsort" in graph["distsort.cli.sort"]
    # distsort.sort1d imports distsort.cluster.locality inside plan_1d only
    assert "distsort.cluster.locality" in graph["distsort.sort1d"]


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_every_module_has_a_floor():
    table = floors()
    assert [f for f, _ in table] == ["cli", "api", "scheduling", "graph", "plan",
                                     "backends", "base"]
    missing = [m for m in modules() if floor_of(m, table) is None]
    assert not missing, f"give these modules a floor in docs/architecture.md: {missing}"


def test_no_new_cycle():
    new = cycles(import_graph()) - KNOWN_CYCLES
    assert not new, f"modules that import each other: {[sorted(c) for c in new]}"


def test_no_new_upward_import():
    new = upward(import_graph(), floors()) - KNOWN_UPWARD
    assert not new, f"imports of a higher floor (docs/architecture.md): {sorted(new)}"


def test_no_cycle_at_all():
    assert not cycles(import_graph())


def test_no_upward_import_at_all():
    assert not upward(import_graph(), floors())


#: What the command may import besides its own modules: the public API (with the
#: checks of ``verify=``, its configuration and its NumPy-or-CuPy answer), the plan (its
#: options too: the ``distsort.*`` values the command reads), the
#: file modules (``inputs``: arrays read from files; ``disksort``: files larger than
#: memory sorted through the disk; ``libc``: the system calls of file writes) and the
#: names of the tasks it times (``taskkeys``).
CLI_MAY_IMPORT = {"distsort", "distsort.api", "distsort.cluster", "distsort.core.config",
                  "distsort.graph.verify", "distsort.core.xp", "distsort.plan.network",
                  "distsort.plan.sortplan", "distsort.plan.options", "distsort.plan.clusterview",
                  "distsort.plan.outofcore", "distsort.plan.engine", "distsort.cluster.view",
                  "distsort.inputs",
                  "distsort.io.disksort", "distsort.core.libc", "distsort.core.taskkeys"}


def cli_reaches_past_the_api(graph):
    return sorted((a, b) for a, targets in graph.items() if a.startswith("distsort.cli")
                  for b in targets if not b.startswith("distsort.cli") and b not in CLI_MAY_IMPORT)


def test_cli_imports_only_the_public_api_and_the_plan():
    assert not cli_reaches_past_the_api(import_graph())


def test_a_cli_import_past_the_api_is_found():
    graph = {"distsort.cli.sort": {"distsort.cli.files", "distsort.api", "distsort.core.memory"},
             "distsort.api": {"distsort.core.memory"}}
    assert cli_reaches_past_the_api(graph) == [("distsort.cli.sort", "distsort.core.memory")]
