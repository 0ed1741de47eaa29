"""What the package's modules may import: the core (mirror, ticks, the shared modules) never
dagster, and no product module the seed's TKC1 reference model (``skewtape_pipeline.reference``)."""

from __future__ import annotations

import ast
from pathlib import Path

import skewtape_pipeline

PACKAGE = Path(skewtape_pipeline.__file__).parent
REFERENCE = "skewtape_pipeline.reference"
DAGSTER_LAYER = ("orchestration", "definitions.py", "celery_definitions.py")


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


def test_imported_modules_when_given_absolute_and_relative_imports_resolves_both():
    source = "import dagster as dg\nfrom ..reference import tkc1\nfrom . import model\n"
    found = imported_modules(source, "skewtape_pipeline.ticks")
    assert {"dagster", "skewtape_pipeline.reference.tkc1", "skewtape_pipeline.ticks.model"} <= found
