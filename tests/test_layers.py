"""The package's layers, read from its source with `ast`: imports point down, no cycles.

CLI (entry point `cli`, the `app` in `cli_app`, the command modules) -> components ->
shared logic (units, pairs, pair scoring, the NLI judge, ...) -> backends (model code, no
spaCy components) and metrics (pure functions). Every import counts, at module level and
inside functions; cycles are checked among module-level imports, which are the ones that run
when a module is imported.
"""
import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

PACKAGE = "spacy_inconsistency"
SOURCE = Path(__file__).resolve().parent.parent / PACKAGE
# Modules spaCy pipeline code lives in; backends/ reaches none of them.
SPACY_PIPELINE = ("spacy.language", "spacy.pipeline")
ENTRY_POINTS = {f"{PACKAGE}.__main__"}
APP = f"{PACKAGE}.cli_app"
CLI_ENTRY = f"{PACKAGE}.cli"
# Known crossings, each to be removed when its code moves (issue 15, item 4); the test fails
# when one no longer occurs, so that the list only shrinks. (Cross-source comparison was the
# last: it now reads a detector's `pair_settings()` instead of importing the component.)
KNOWN_UPWARD_IMPORTS: Set[Tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: Dict[str, Path] = {_module_name(p): p for p in sorted(SOURCE.rglob("*.py"))}


def _targets(module: str, node: ast.AST) -> Iterator[str]:
    """Full names an import statement reaches: package modules, else the external names."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    for alias in node.names:
        name = f"{source}.{alias.name}"
        if name in MODULES:
            yield name
            # `from pkg import submodule` runs pkg too, unless pkg holds this module
            # (then it is already being imported).
            if not module.startswith(source + "."):
                yield source
        else:
            yield source


def _imports(module: str) -> Tuple[Set[str], Set[str]]:
    """(module-level, all) names imported by `module`."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), filename=str(MODULES[module]))
    # Module level: the body, including `if`/`try` blocks, but not function bodies.
    top_nodes = set()
    for stmt in tree.body:
        stack: List[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                top_nodes.add(node)
            stack.extend(ast.iter_child_nodes(node))
    top: Set[str] = set()
    every: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = set(_targets(module, node))
            every |= names
            if node in top_nodes:
                top |= names
    return top, every


IMPORTS = {module: _imports(module) for module in MODULES}


def _package_imports(module: str, *, top_only: bool = False) -> Set[str]:
    top, every = IMPORTS[module]
    return {m for m in (top if top_only else every) if m in MODULES and m != module}


def _imports_external(module: str, prefixes: Tuple[str, ...]) -> Set[str]:
    return {n for n in IMPORTS[module][1] if any(n == p or n.startswith(p + ".") for p in prefixes)}


def _is_cli(module: str) -> bool:
    last = module.rpartition(".")[2]
    return module in (CLI_ENTRY, APP) or last.endswith("commands")


def _under(module: str, package: str) -> bool:
    return module.startswith(f"{PACKAGE}.{package}.") or module == f"{PACKAGE}.{package}"


def test_the_walk_sees_the_package():
    # Guards the walk itself: a parser that found nothing would pass every rule below.
    assert {f"{PACKAGE}.cli", APP, f"{PACKAGE}.backends.llm", f"{PACKAGE}.nli_judge"} <= set(MODULES)
    assert APP in _package_imports(f"{PACKAGE}.relations_commands", top_only=True)
    assert f"{PACKAGE}.pair_scoring" in _package_imports(f"{PACKAGE}.nli_judge")
    assert f"{PACKAGE}.pair_scoring" not in _package_imports(f"{PACKAGE}.nli_judge", top_only=True)
    assert "spacy.language" in IMPORTS[f"{PACKAGE}.segment"][0]


def test_no_import_cycles_at_module_level():
    graph = {m: _package_imports(m, top_only=True) for m in MODULES}
    cycles = []
    state: Dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: List[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("layer", ["backends", "metrics"])
def test_bottom_layers_import_no_component_and_no_cli(layer):
    crossings = [
        (m, dep)
        for m in MODULES if _under(m, layer)
        for dep in _package_imports(m)
        if _under(dep, "components") or _is_cli(dep)
    ]
    assert not crossings, crossings


@pytest.mark.parametrize("layer,allowed", [("backends", ("backends", "errors", "about")),
                                           ("metrics", ("metrics", "errors", "about"))])
def test_bottom_layers_import_only_themselves(layer, allowed):
    crossings = [
        (m, dep)
        for m in MODULES if _under(m, layer)
        for dep in _package_imports(m)
        if not any(_under(dep, a) for a in allowed)
    ]
    assert not crossings, crossings


def test_backends_reach_no_spacy_pipeline_code():
    # Everything a backend imports, however indirectly, is free of spaCy pipeline code.
    reached: Set[str] = set()
    todo = [m for m in MODULES if _under(m, "backends")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(_package_imports(module))
    offenders = {m: sorted(_imports_external(m, SPACY_PIPELINE)) for m in sorted(reached)}
    assert not {m: names for m, names in offenders.items() if names}


def test_only_the_cli_imports_the_cli():
    crossings = []
    for module in MODULES:
        for dep in _package_imports(module):
            if dep == CLI_ENTRY and module not in ENTRY_POINTS:
                crossings.append((module, dep))
            elif _is_cli(dep) and dep != CLI_ENTRY and not _is_cli(module):
                crossings.append((module, dep))
    assert not crossings, crossings


def test_command_modules_register_on_the_app_not_the_entry_point():
    commands = [m for m in MODULES if _is_cli(m) and m not in (CLI_ENTRY, APP)]
    assert commands, "no command modules found"
    for module in commands:
        assert APP in _package_imports(module, top_only=True), module
        assert CLI_ENTRY not in _package_imports(module), module
        assert module in _package_imports(CLI_ENTRY, top_only=True), f"{CLI_ENTRY} does not register {module}"
    assert _package_imports(APP) == set()


def test_only_components_and_the_cli_import_components():
    crossings = {
        (m, dep)
        for m in MODULES if not _under(m, "components") and not _is_cli(m)
        for dep in _package_imports(m) if _under(dep, "components")
    }
    assert crossings - KNOWN_UPWARD_IMPORTS == set(), "new upward imports"
    assert KNOWN_UPWARD_IMPORTS - crossings == set(), "fixed: remove from KNOWN_UPWARD_IMPORTS"
