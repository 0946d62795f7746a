"""`make structure`: no module in app/ over 800 lines, and no import circle among app's modules.

An import counts wherever it is written (module level or inside a function: either runs sooner or later), except
under ``if TYPE_CHECKING:``, which never runs. An import edge that closes a circle may be listed, with its reason,
in .ci/structure_allowed.txt, as may a module over the limit; an entry that no longer applies fails too, so that
list only shrinks.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 800
ALLOWED = Path(__file__).with_name("structure_allowed.txt")

Graph = dict[str, dict[str, int]]  # importer -> {imported: line of the first such import}


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under ``package_dir`` (a package's name is its __init__.py)."""
    base = package_dir.parent
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(base).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def oversized(modules: dict[str, Path], limit: int = MAX_LINES) -> list[tuple[Path, int]]:
    counts = ((path, len(path.read_text(encoding="utf-8").splitlines())) for path in modules.values())
    return sorted(((path, n) for path, n in counts if n > limit), key=lambda item: -item[1])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_checking: bool = False) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth; those inside an ``if TYPE_CHECKING:`` body only with
    ``type_checking``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_graph(modules: dict[str, Path], type_checking: bool = False) -> Graph:
    """Edges between the given modules. ``from package import name`` points at ``package.name`` where that is a
    module, else at the package itself; importing a module does not count as importing its parent packages."""
    graph: Graph = {name: {} for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), type_checking):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.append(submodule if submodule in modules else base)
            for target in targets:
                # ``import a.b.c`` where only ``a.b`` is ours (a name inside it): the nearest module that exists.
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].setdefault(target, node.lineno)
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's components with more than one module (each such component holds at least one circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def shortest_circle(graph: Graph, start: str, within: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside one component: [start, ..., start]."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in within:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a component but on no circle")


def circles(graph: Graph) -> list[list[str]]:
    """For each component, the shortest circle through each of its modules, each circle once."""
    found: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for module in component:
            circle = shortest_circle(graph, module, members)
            ring = circle[:-1]
            turn = ring.index(min(ring))
            key = tuple(ring[turn:] + ring[:turn])
            if key not in seen:
                seen.add(key)
                found.append([*key, key[0]])
    return found


@dataclass
class Allowed:
    edges: dict[tuple[str, str], str] = field(default_factory=dict)  # (importer, imported) -> reason
    long_modules: dict[str, str] = field(default_factory=dict)  # path under the package's parent -> reason
    problems: list[str] = field(default_factory=list)


def read_allowed(path: Path) -> Allowed:
    """One entry a line, each with its reason: ``importer -> imported  # why`` for an import edge that closes a
    circle, ``app/some/module.py  # why`` for a module over the limit. Blank lines and ``#`` lines are skipped."""
    allowed = Allowed()
    if not path.exists():
        return allowed
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        entry, _, reason = text.partition("#")
        importer, arrow, imported = entry.partition("->")
        if arrow and importer.strip() and imported.strip() and reason.strip():
            allowed.edges[(importer.strip(), imported.strip())] = reason.strip()
        elif not arrow and entry.strip().endswith(".py") and reason.strip():
            allowed.long_modules[entry.strip()] = reason.strip()
        else:
            allowed.problems.append(
                f"{path.name}:{number}: write 'importer -> imported  # why' or 'app/module.py  # why'"
            )
    return allowed


def check(package_dir: Path, allowed_file: Path, limit: int = MAX_LINES, type_checking: bool = False) -> list[str]:
    modules = module_files(package_dir)
    base = package_dir.parent
    allowed = read_allowed(allowed_file)
    problems = list(allowed.problems)
    too_long = {path.relative_to(base).as_posix(): lines for path, lines in oversized(modules, limit)}
    problems += [
        f"{path} has {lines} lines (at most {limit}): split it by what its parts do"
        for path, lines in too_long.items()
        if path not in allowed.long_modules
    ]
    problems += [
        f"{allowed_file.name}: {path} is no longer over {limit} lines: remove its entry"
        for path in sorted(allowed.long_modules)
        if path not in too_long
    ]
    graph = import_graph(modules, type_checking)
    in_circle = {module: i for i, component in enumerate(strongly_connected(graph)) for module in component}
    for importer, imported in sorted(allowed.edges):
        closes = imported in graph.get(importer, {}) and in_circle.get(importer, -1) == in_circle.get(imported, -2)
        if not closes:
            problems.append(
                f"{allowed_file.name}: '{importer} -> {imported}' no longer closes an import circle: remove its entry"
            )
    remaining: Graph = {
        importer: {imported: line for imported, line in edges.items() if (importer, imported) not in allowed.edges}
        for importer, edges in graph.items()
    }
    for circle in circles(remaining):
        steps = [
            f"  {modules[a].relative_to(base)}:{remaining[a][b]} imports {b}" for a, b in itertools.pairwise(circle)
        ]
        problems.append("import circle " + " -> ".join(circle) + "\n" + "\n".join(steps))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--package", type=Path, default=ROOT / "app", help="the package to check (default: app)")
    parser.add_argument("--allowed", type=Path, default=ALLOWED, help="the allowed import edges")
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    parser.add_argument(
        "--type-checking", action="store_true", help="count imports under `if TYPE_CHECKING:` too (type-only circles)"
    )
    args = parser.parse_args(argv)
    problems = check(args.package, args.allowed, args.max_lines, args.type_checking)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} structure problem(s)", file=sys.stderr)
        return 1
    print(f"structure: no module over {args.max_lines} lines, no import circle outside {args.allowed.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
