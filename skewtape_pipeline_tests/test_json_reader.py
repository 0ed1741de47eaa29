"""Every JSON text from outside goes through one reader (``fsio.load_json``) with a size and a
depth limit: a manifest nested 200,000 deep is one typed error naming the file, never a
RecursionError, and no module parses JSON with a bare ``json.loads``/``json.load``."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import skewtape_pipeline
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ConfigError, MalformedJsonError
from skewtape_pipeline.fsio import JSON_MAX_DEPTH, json_depth, load_json, read_json_file
from skewtape_pipeline.mirror.folder_kinds import check_apply_folders, folder_kind

PACKAGE = Path(skewtape_pipeline.__file__).parent
DEEP = b"[" * 200_000 + b"]" * 200_000
"""The manifest of the hostile run: 200,000 nested arrays."""
READER = ("fsio.py", "load_json")
"""The one function allowed to call the json module's parser."""


def bare_json_parses(source: str) -> list[tuple[int, str | None]]:
    """(line, enclosing function) of every ``json.load(s)`` call or ``from json import load``
    in ``source``."""
    found = []
    tree = ast.parse(source)
    for function in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        name = getattr(function, "name", None)
        for node in ast.walk(function):
            names = {a.name for a in node.names} if isinstance(node, ast.ImportFrom) else ()
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "json"
                and {"load", "loads"} & set(names)
            ):
                found.append((node.lineno, name))
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("load", "loads")
                and isinstance(node.value, ast.Name)
                and node.value.id == "json"
            ):
                found.append((node.lineno, name))
    innermost: dict[int, str | None] = {}
    for line, name in found:  # the walk meets a call once per enclosing scope: keep the inner
        innermost[line] = name if innermost.get(line) is None else innermost[line]
    return sorted(innermost.items())


def test_no_module_when_scanned_parses_json_outside_the_guarded_reader():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        calls = [
            (line, name)
            for line, name in bare_json_parses(path.read_text(encoding="utf-8"))
            if (rel, name) != READER
        ]
        if calls:
            offenders[rel] = calls
    assert offenders == {}


def test_bare_json_parses_when_given_each_spelling_finds_them():
    source = (
        "import json\nfrom json import loads\n"
        "def f(p):\n    return json.load(open(p))\n"
        "def g(b):\n    return json.loads(b), json.dumps(b)\n"
    )
    assert bare_json_parses(source) == [(2, None), (4, "f"), (6, "g")]


def test_load_json_when_nested_past_the_limit_raises_naming_the_source():
    with pytest.raises(MalformedJsonError, match=r"deep\.json: .*nested too deep.*200000"):
        load_json(DEEP, "deep.json")
    with pytest.raises(ConfigError, match="nested too deep"):
        load_json(DEEP, "deep.json", error=ConfigError)
    nested = "[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH
    assert load_json(nested, "ok") == json.loads(nested)


def test_load_json_when_brackets_are_inside_strings_does_not_count_them():
    text = json.dumps({"path": "[" * 500, "other": "]]]" * 300, "x": [['"[[']]})
    assert json_depth(text.encode()) == 3
    assert load_json(text, "strings")["path"] == "[" * 500


def test_load_json_when_past_the_size_limit_raises_without_parsing(tmp_path):
    with pytest.raises(MalformedJsonError, match=r"big\.json: .*1001 bytes; at most 1000"):
        load_json(b" " * 1000 + b"1", "big.json", max_bytes=1000)
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b"0," * 5000 + b"0]")
    with pytest.raises(MalformedJsonError, match="at most 100"):
        read_json_file(path, max_bytes=100)


def test_folder_kind_when_a_manifest_is_nested_200000_deep_is_no_recursion_error(tmp_path):
    snapshot, delta = tmp_path / "snapshot", tmp_path / "delta"
    for folder in (snapshot, delta):
        folder.mkdir()
        (folder / "manifest.json").write_bytes(DEEP)
    assert folder_kind(delta) == "other"  # left to the apply's own checks, which name it
    check_apply_folders(snapshot, delta)


@pytest.mark.parametrize("command", ["verify", "apply-delta", "catch-up"])
def test_cli_when_a_manifest_is_nested_200000_deep_exits_2_with_one_line(command, tmp_path, capsys):
    history, deltas = tmp_path / "history", tmp_path / "deltas"
    for folder in (history / "2026-09", deltas / "2026-10"):
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_bytes(DEEP)
        (folder / "CHECKSUMS.sha256").write_text("")
    argv = {
        "verify": ["verify", str(history / "2026-09")],
        "apply-delta": ["apply-delta", str(history / "2026-09"), str(deltas / "2026-10"),
                        "--no-audit"],
        "catch-up": ["catch-up", str(history), str(deltas), "--no-audit"],
    }[command]  # fmt: skip
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
