"""The package's imports go one way: no module imports one that imports it back (not even inside a function),
and no layer imports a layer built on it. Read from the sources (every ``import`` statement, at the top, in a
function or under ``TYPE_CHECKING``), so nothing is imported to check it."""

import ast
from pathlib import Path

import emuplan

PACKAGE = Path(emuplan.__file__).parent
# Each layer may import the ones before it, never one after it.
DOMAIN = (
    "emuplan.workload",
    "emuplan.results",
    "emuplan.charts",
    "emuplan.sandbox",
    "emuplan.measure",
    "emuplan.simulate",
)
# The package's own leaves, which every layer may import: the errors' base, the wording, roles and limits.
BASE = ("emuplan.errors", "emuplan.wording", "emuplan.roles", "emuplan.json_input", "emuplan.child_memory")
LAYERS = (
    BASE,
    DOMAIN,
    ("emuplan.store",),
    ("emuplan.services",),
    ("emuplan.api", "emuplan.cli", "emuplan.demo", "emuplan.main"),
)
# What store/ may still import from the domain packages: data types and constants a row is read back as, no logic.
STORE_DOMAIN_IMPORTS = {
    # The list's verdict order names the verdicts; a run's kind is their Literal type.
    ("emuplan.store.runs", "emuplan.results.analysis.verdict"),
    ("emuplan.store.runs", "emuplan.results.analysis.run_analysis"),
    # A stored plan is read back as its PlanDocument.
    ("emuplan.store.plans", "emuplan.workload.document"),
    # A name is refused where a built-in profile holds it (``platform_exists``, which a stored plan's check reads).
    ("emuplan.store.platforms", "emuplan.workload.platforms"),
}


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (``from a import b``: ``a.b`` when
    that is a module, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])]
                )
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
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
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer_of(module: str) -> int | None:
    for number, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return number
    return None


def test_cycles_finds_a_circle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # cli.app imports cli.remote only inside its callback; store.workload_export reads stored models.
    assert "emuplan.cli.remote" in graph["emuplan.cli.app"]
    assert "emuplan.services.model_definitions" in graph["emuplan.services.workload_export"]


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


def test_no_layer_imports_one_built_on_it():
    upward = sorted(
        (module, imported)
        for module, imports in import_graph().items()
        for imported in imports
        if layer_of(module) is not None and layer_of(imported) is not None and layer_of(imported) > layer_of(module)
    )
    assert upward == []


# ``emuplan.results``' rooms, each importing only the ones before it: the canonical table at the bottom, then the
# import's memory account, the containers (gzip, Arrow IPC, Parquet), the formats' readers, what reads a file by its
# format or analyses a run, and the huge-file path over all of them. (Named without the package: the moves script of
# issue 43 rewrites the old module path that the analysis room's full name spells.)
RESULTS_ROOMS = (
    ("canonical", "run_fields"),
    ("budget",),
    ("containers",),
    ("formats",),
    ("parse", "analysis", "export"),
    ("streaming",),
)


def results_room_of(module: str) -> int | None:
    for number, names in enumerate(RESULTS_ROOMS):
        if any(module == f"emuplan.results.{name}" or module.startswith(f"emuplan.results.{name}.") for name in names):
            return number
    return None


def test_every_results_module_has_a_room():
    graph = import_graph()
    assert [m for m in graph if m.startswith("emuplan.results.") and results_room_of(m) is None] == []


def test_no_results_room_imports_one_built_on_it():
    upward = sorted(
        (module, imported)
        for module, imports in import_graph().items()
        if module.startswith("emuplan.results.")
        for imported in imports
        if imported.startswith("emuplan.results.") and results_room_of(imported) > results_room_of(module)
    )
    assert upward == []


def test_the_canonical_table_imports_nothing_from_results():
    assert [m for m in import_graph()["emuplan.results.canonical"] if m.startswith("emuplan.results")] == []


def test_only_the_registry_names_a_format_module():
    """A format's module is reached through ``results.formats`` (``format_module``): nothing outside the package
    imports one, and no format's module imports another's (what two share lives in a neutral module)."""
    from emuplan.results.formats import DETECTION_ORDER

    format_modules = {f"emuplan.results.formats.{entry.module}" for entry in DETECTION_ORDER}
    reaching = sorted(
        (module, imported)
        for module, imports in import_graph().items()
        for imported in imports & format_modules
        if not module.startswith("emuplan.results.formats") or module in format_modules
    )
    assert reaching == []


def test_store_imports_no_domain_logic():
    """store/ only persists and reads rows and blobs: parsing, statistics, verdicts and figures are services/'."""
    domain_imports = {
        (module, imported)
        for module, imports in import_graph().items()
        if layer_of(module) == LAYERS.index(("emuplan.store",))
        for imported in imports
        if layer_of(imported) == LAYERS.index(DOMAIN)
    }
    assert domain_imports == STORE_DOMAIN_IMPORTS
