"""What the package's modules may import: the core (mirror, ticks, the shared modules) never
dagster, and no product module the seed's TKC1 reference model (``skewtape_pipeline.reference``);
only ``arrow_memory`` hands bytes to pyarrow; the walls between ticks' subjects and between the
orchestration's domains (its mirror imports no ticks, its shared modules no domain)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import skewtape_pipeline

PACKAGE = Path(skewtape_pipeline.__file__).parent
REFERENCE = "skewtape_pipeline.reference"
DAGSTER_LAYER = ("orchestration", "definitions.py", "celery_definitions.py", "celery_worker.py")


def imported_modules(source: str, package: str) -> set[str]:
    """Every module ``source`` (a module of ``package``) imports: ``import a.b`` and
    ``from a.b import c`` give ``a.b`` (and ``a.b.c``); relative imports are resolved."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def imports_of(path: Path) -> set[str]:
    package = ".".join(("skewtape_pipeline", *path.relative_to(PACKAGE).parent.parts))
    return imported_modules(path.read_text(encoding="utf-8"), package)


def product_modules(*, exclude: tuple[str, ...]) -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in exclude
    ]


def test_product_modules_when_scanned_never_import_the_tkc1_reference_model():
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            m for m in imports_of(path) if m.startswith(REFERENCE)
        )
        for path in product_modules(exclude=("reference",))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_modules_when_scanned_never_import_dagster():
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            m for m in imports_of(path) if m.split(".")[0].startswith("dagster")
        )
        for path in product_modules(exclude=DAGSTER_LAYER)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


PYTHON_MEMORY_WRAPPERS = frozenset({"py_buffer", "foreign_buffer", "BufferReader"})
"""pyarrow's ways of wrapping memory Python owns (see ``skewtape_pipeline.arrow_memory``)."""


def wrapper_uses(source: str) -> set[str]:
    """The names of :data:`PYTHON_MEMORY_WRAPPERS` that ``source`` uses (``pa.x`` or ``x``)."""
    return {
        name
        for node in ast.walk(ast.parse(source))
        for name in [getattr(node, "attr", None) or getattr(node, "id", None)]
        if name in PYTHON_MEMORY_WRAPPERS
    }


def test_product_modules_when_scanned_hand_bytes_to_pyarrow_only_through_arrow_memory():
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(wrapper_uses(path.read_text(encoding="utf-8")))
        for path in product_modules(exclude=())
        if path != PACKAGE / "arrow_memory.py"
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert wrapper_uses("import pyarrow as pa\nr = pa.BufferReader(b'x')\n") == {"BufferReader"}


def test_imported_modules_when_given_absolute_and_relative_imports_resolves_both():
    source = "import dagster as dg\nfrom ..reference import tkc1\nfrom . import model\n"
    found = imported_modules(source, "skewtape_pipeline.ticks")
    assert {"dagster", "skewtape_pipeline.reference.tkc1", "skewtape_pipeline.ticks.model"} <= found


def crossings(imports: dict[str, set[str]], packages: tuple[str, ...]) -> dict[str, list[str]]:
    """Of ``imports`` (module -> what it imports), the modules that import ``packages`` or
    anything below them, with what they import of them."""

    def crosses(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in packages)

    found = {module: sorted(filter(crosses, imported)) for module, imported in imports.items()}
    return {module: names for module, names in found.items() if names}


def imports_under(*parts: str) -> dict[str, set[str]]:
    """What every module below ``skewtape_pipeline/<parts>`` imports (an empty folder is an
    error: a wall around nothing holds vacuously)."""
    paths = sorted(PACKAGE.joinpath(*parts).rglob("*.py"))
    assert paths, f"no modules under {'/'.join(parts)}"
    return {str(path.relative_to(PACKAGE)): imports_of(path) for path in paths}


def test_encode_modules_when_scanned_import_nothing_from_archive_or_fills():
    walls = ("skewtape_pipeline.ticks.archive", "skewtape_pipeline.ticks.fills")
    assert crossings(imports_under("ticks", "encode"), walls) == {}


def test_archive_modules_when_scanned_import_nothing_from_fills():
    walls = ("skewtape_pipeline.ticks.fills",)
    assert crossings(imports_under("ticks", "archive"), walls) == {}


def test_ticks_modules_outside_fills_when_scanned_never_read_the_mirror():
    outside = {
        module: imported
        for module, imported in imports_under("ticks").items()
        if "fills" not in Path(module).parts
    }
    assert crossings(outside, ("skewtape_pipeline.mirror",)) == {}


POLICY_MAY_IMPORT = (
    "skewtape_pipeline.errors",
    "skewtape_pipeline.fsio",
    "skewtape_pipeline.locations",
    "skewtape_pipeline.storage",
    "skewtape_pipeline.ticks.encode.writer_settings",
)
"""All the tier policy (``ticks/archive/store/policy.py``) imports of the package: it knows no
archive."""


def test_policy_module_when_scanned_imports_no_archive_module():
    imported = imports_of(PACKAGE / "ticks" / "archive" / "store" / "policy.py")
    ours = {name for name in imported if name.startswith("skewtape_pipeline")}
    assert ours, "the scan found no import of the package: a wall around nothing"
    assert sorted(m for m in ours if not m.startswith(POLICY_MAY_IMPORT)) == []


ARCHIVE = "skewtape_pipeline.ticks.archive"
OPERATIONS_MAY_IMPORT = {
    "compact": {"compact_plan"},
    "reader": {"read_plan"},
}
"""The operations that carry out another's plan: compaction its plan, the reader its read plan."""


def archive_imports(floor: str | None = None) -> dict[str, set[str]]:
    """What every module of ``ticks/archive`` (or of its ``floor``) imports of the archive."""
    found = imports_under("ticks", "archive", *([floor] if floor else []))
    return {module: {m for m in names if m.startswith(ARCHIVE)} for module, names in found.items()}


def test_store_modules_when_scanned_import_nothing_above_the_store():
    above = (f"{ARCHIVE}.core", f"{ARCHIVE}.handle", f"{ARCHIVE}.ops")
    assert crossings(archive_imports("store"), above) == {}


def test_core_module_when_scanned_imports_only_the_store():
    imported = imports_of(PACKAGE / "ticks" / "archive" / "core.py")
    ours = {m for m in imported if m.startswith(ARCHIVE)}
    assert ours, "the scan found no import of the store: a wall around nothing"
    assert sorted(m for m in ours if not m.startswith(f"{ARCHIVE}.store")) == []


def test_operation_modules_when_scanned_never_import_the_front_door_or_another_operation():
    offenders = {}
    for module, imported in archive_imports("ops").items():
        name = Path(module).stem
        allowed = {f"{ARCHIVE}.ops.{other}" for other in OPERATIONS_MAY_IMPORT.get(name, ())}
        wrong = crossings({module: imported}, (f"{ARCHIVE}.handle", f"{ARCHIVE}.ops"))
        wrong = [m for m in wrong.get(module, []) if not m.startswith(tuple(allowed))]
        if wrong and name != "__init__":
            offenders[module] = wrong
    assert offenders == {}


def test_archive_modules_below_the_front_door_when_scanned_never_import_it():
    below = {m: names for m, names in archive_imports().items() if Path(m).name != "handle.py"}
    assert crossings(below, (f"{ARCHIVE}.handle",)) == {}


ARCHIVE_MODULE_LINES = 800
"""Issue 29's cap on a module of ``ticks/archive``: a reader takes one in at a sitting."""


def test_archive_modules_when_counted_hold_at_most_800_lines_each():
    folder = PACKAGE / "ticks" / "archive"
    modules = sorted(folder.rglob("*.py"))
    assert len(modules) > 20, "the count found too few modules: a cap over nothing"
    lines = {str(m.relative_to(folder)): len(m.read_text().splitlines()) for m in modules}
    assert {name: n for name, n in lines.items() if n > ARCHIVE_MODULE_LINES} == {}


def test_mirror_modules_when_scanned_import_no_ticks():
    assert crossings(imports_under("mirror"), ("skewtape_pipeline.ticks",)) == {}


def test_orchestration_mirror_modules_when_scanned_import_nothing_from_ticks():
    walls = ("skewtape_pipeline.ticks", "skewtape_pipeline.orchestration.ticks")
    assert crossings(imports_under("orchestration", "mirror"), walls) == {}


def test_orchestration_shared_modules_when_scanned_import_no_domain():
    walls = (
        "skewtape_pipeline.ticks",
        "skewtape_pipeline.orchestration.mirror",
        "skewtape_pipeline.orchestration.ticks",
        "skewtape_pipeline.orchestration.definitions",
    )
    assert crossings(imports_under("orchestration", "shared"), walls) == {}


def test_crossings_when_a_module_imports_below_a_wall_names_it_and_not_a_lookalike():
    imports = {
        "ticks/encode/a.py": {
            "skewtape_pipeline.ticks.archive.store.catalog",
            "skewtape_pipeline.ticks",
        },
        "ticks/encode/b.py": {"skewtape_pipeline.ticks.archived", "skewtape_pipeline.ticks.encode"},
    }
    assert crossings(imports, ("skewtape_pipeline.ticks.archive",)) == {
        "ticks/encode/a.py": ["skewtape_pipeline.ticks.archive.store.catalog"]
    }


STDLIB_ONLY_ENCODE = ("sides.py", "decimals.py", "report.py", "writer_settings.py")
"""The encode modules their docstrings call stdlib only (``skewtape_pipeline.errors`` aside):
importable without pyarrow, so the archive's tier settings load without it."""


def test_stdlib_only_encode_modules_when_scanned_import_only_stdlib_and_errors():
    def foreign(name: str) -> bool:
        top = name.split(".")[0]
        return top not in sys.stdlib_module_names and not name.startswith(
            ("skewtape_pipeline.errors", "__future__")
        )

    found = {
        name: sorted(filter(foreign, imports_of(PACKAGE / "ticks" / "encode" / name)))
        for name in STDLIB_ONLY_ENCODE
    }
    assert {name: imported for name, imported in found.items() if imported} == {}


ROOT_PARAMETERS = frozenset({"root", "archive_root"})
"""Parameter names that hand a function the archive's root as a path."""
STORE = Path("ticks", "archive", "store")
TAKE_THE_ROOT = frozenset(
    {
        "ticks/archive/core.py:ArchiveCore.__init__",  # the core is built from the root it holds
        "ticks/archive/handle.py:Archive.__init__",  # the front door, built from the root
    }
)
"""The functions outside ``ticks/archive/store/`` that may take the archive's root: the ones
it is built into."""


def root_taking_functions(source: str) -> list[str]:
    """The (dotted, class-qualified) names of the functions in ``source`` that have a
    parameter named as in :data:`ROOT_PARAMETERS`."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
                if names & ROOT_PARAMETERS:
                    found.append(prefix + child.name)
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return found


def test_ticks_functions_outside_the_store_when_scanned_take_no_archive_root():
    offenders = {
        f"{path.relative_to(PACKAGE).as_posix()}:{name}"
        for path in sorted((PACKAGE / "ticks").rglob("*.py"))
        if not path.relative_to(PACKAGE).is_relative_to(STORE)
        for name in root_taking_functions(path.read_text(encoding="utf-8"))
    }
    assert sorted(offenders - TAKE_THE_ROOT) == []


def test_root_taking_functions_when_given_methods_and_nested_functions_names_them_all():
    source = (
        "class A:\n"
        "    def __init__(self, root): ...\n"
        "    def other(self, roots): ...\n"
        "def f(*, archive_root):\n"
        "    def g(root, /): ...\n"
    )
    assert root_taking_functions(source) == ["A.__init__", "f", "f.g"]


LOCK_NAME = "archive_lock"
LOCK_USERS = frozenset({"ticks/archive/core.py"})
"""The module that may name the archive's lock function: the core, which defines it and whose
``locked`` is every writer's one way to the lock."""


def uses_name(source: str, name: str) -> bool:
    """True when ``source`` uses ``name``: a name, an attribute (``x.name``), an import of it
    (``from m import name``) or its definition."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id == name:
            return True
        if isinstance(node, ast.Attribute) and node.attr == name:
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
    return False


def test_archive_lock_when_scanned_is_named_only_by_the_core_that_defines_it():
    users = {
        path.relative_to(PACKAGE).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if uses_name(path.read_text(encoding="utf-8"), LOCK_NAME)
    }
    assert users == LOCK_USERS


def test_uses_name_when_given_a_name_an_attribute_an_import_or_a_definition_finds_each():
    assert uses_name("from m import archive_lock\n", LOCK_NAME)
    assert uses_name("layout.archive_lock(root)\n", LOCK_NAME)
    assert uses_name("f = archive_lock\n", LOCK_NAME)
    assert uses_name("def archive_lock(root): ...\n", LOCK_NAME)
    assert not uses_name("'archive_lock' in text  # archive_lock\n", LOCK_NAME)
