"""The architecture, checked: each layer imports only from the layers below it, the API's
routes take nothing from app/ml but its exceptions, no module is part of an import circle
(function-local and type-checking imports included), and each module says its concern."""

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

APP = ROOT / "app"
# A layer may not import these (its own and lower layers are fine).
FORBIDDEN = {
    "app.core": ("app.db", "app.jobs", "app.schemas", "app.services", "app.api", "app.worker",
                 "app.ml", "app.runtime", "app.main", "app.cli"),
    "app.ml": ("app.db", "app.jobs", "app.schemas", "app.services", "app.api", "app.worker",
               "app.runtime", "app.main", "app.cli"),
    "app.graders": ("app.db", "app.jobs", "app.schemas", "app.services", "app.api", "app.worker",
                    "app.ml", "app.runtime", "app.main", "app.cli"),
    "app.jobs": ("app.db", "app.schemas", "app.services", "app.api", "app.worker",
                 "app.runtime", "app.main", "app.cli"),
    "app.db": ("app.schemas", "app.services", "app.api", "app.worker", "app.runtime",
               "app.main", "app.cli"),
    "app.schemas": ("app.db", "app.services", "app.api", "app.worker", "app.runtime",
                    "app.main", "app.cli"),
    "app.services": ("app.api", "app.worker", "app.runtime", "app.main", "app.cli"),
    "app.worker": ("app.api", "app.main", "app.cli"),
    "app.api": ("app.worker", "app.main", "app.cli"),
}  # fmt: skip


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(APP.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module, names) for every `import` and `from … import` in the file, wherever it is
    (at the top, in a function, under TYPE_CHECKING)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def layer_of(module: str) -> str | None:
    return next(
        (layer for layer in FORBIDDEN if module == layer or module.startswith(layer + ".")), None
    )


@pytest.mark.parametrize("name,path", list(modules()), ids=lambda v: str(v))
def test_each_module_imports_only_from_layers_below(name: str, path: Path) -> None:
    layer = layer_of(name)
    if layer is None:
        return
    wrong = [
        module
        for module, _ in imports(path)
        if any(module == f or module.startswith(f + ".") for f in FORBIDDEN[layer])
    ]
    assert not wrong, f"{name} ({layer}) imports {wrong}"


def test_routes_take_only_exceptions_from_ml() -> None:
    taken = []
    for name, path in modules():
        if not name.startswith("app.api"):
            continue
        for module, names in imports(path):
            if module.startswith("app.ml"):
                source = importlib.import_module(module)
                for imported in names:
                    value = getattr(source, imported)
                    if not (isinstance(value, type) and issubclass(value, BaseException)):
                        taken.append(f"{name}: {module}.{imported}")
    assert not taken, "the API uses app.ml through services and schemas: " + ", ".join(taken)


def test_no_import_cycles() -> None:
    """Not even through an import inside a function or for type checking only: each
    would be a circle a reader has to keep in mind."""
    graph: dict[str, set[str]] = {}
    known = dict(modules())
    for name, path in known.items():
        graph[name] = set()
        for module, names in imports(path):
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in known] or [module]
            graph[name].update(t for t in targets if t in known and t != name)
    cycles = []

    def visit(node: str, trail: list[str], done: set[str]) -> None:
        if node in trail:
            cycles.append(trail[trail.index(node) :] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*trail, node], done)
        done.add(node)

    done: set[str] = set()
    for start in sorted(graph):
        visit(start, [], done)
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_every_module_says_what_it_is_for() -> None:
    """Each module holds one concern, and its docstring names it: a reader finds the right
    file from the names and first lines alone (packages' __init__ files aside)."""
    silent = [
        name
        for name, path in modules()
        if path.name != "__init__.py" and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert not silent, f"modules that do not say what they are for: {silent}"
