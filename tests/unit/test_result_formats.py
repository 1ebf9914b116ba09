"""The formats' registry (``results.formats``): docs/formats.md lists what it lists, and each format's module
recognises and parses its format without calling another format's module."""

import ast
import inspect
import re
from pathlib import Path

import emuplan.results.formats as formats
from emuplan.results.formats import DETECTION_ORDER, FORMATS, format_module
from emuplan.results.formats.headers import map_columns

FORMATS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
FORMAT_TABLE_HEADER = "| format | what it reads |"


def documented_format_rows() -> list[str]:
    """The format names of docs/formats.md's table, in its order."""
    lines = FORMATS_PAGE.read_text().splitlines()
    start = lines.index(FORMAT_TABLE_HEADER) + 2  # below the |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(re.match(r"\|\s*`([^`]+)`\s*\|", line).group(1))
    return rows


def test_the_docs_list_every_format_in_the_registry_order() -> None:
    rows = documented_format_rows()
    missing = [name for name in FORMATS if name not in rows]
    extra = [name for name in rows if name not in FORMATS]
    assert (missing, extra) == ([], []), (
        f"docs/formats.md's format table: rows missing {missing}, rows not formats {extra}"
    )
    assert rows == list(FORMATS)


def test_each_format_module_recognises_and_parses_what_its_kind_is_given() -> None:
    first_parameters = {"text": ("upload", "upload"), "table": ("columns", "reader")}
    for entry in DETECTION_ORDER:
        module = format_module(entry)
        recognises, parse = (list(inspect.signature(getattr(module, f)).parameters) for f in ("recognises", "parse"))
        assert (recognises[0], parse[0]) == first_parameters[entry.kind], entry.name


def test_no_format_module_imports_another() -> None:
    package = Path(formats.__file__).parent
    siblings = {f"{formats.__name__}.{entry.module}" for entry in DETECTION_ORDER}
    for entry in DETECTION_ORDER:
        tree = ast.parse((package / f"{entry.module}.py").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {
            f"{node.module}.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert imported & siblings == set(), entry.name


def test_the_text_formats_are_tried_first_and_the_stricter_table_formats_before_per_iteration() -> None:
    # parse.py reads a table only once no text format claims the content: the list says so.
    assert [entry.kind for entry in DETECTION_ORDER] == ["text"] * 5 + ["table"] * 3
    # A KAI summary and a per-flow table have a completion-time column: per-iteration takes them too.
    headers_of = {
        "kai-summary": ["Data Size", "Collective", "Completion Time (ms)", "Algbw (GB/s)", "Busbw (GB/s)", "Ideal (%)"],
        "per-flow": ["iteration", "src", "dst", "qp", "bytes", "start_us", "fct_us"],
        "per-iteration": ["iteration", "size", "collective", "time_us"],
    }
    for name, names in headers_of.items():
        columns = map_columns(names, None)
        claiming = [e.name for e in DETECTION_ORDER if e.kind == "table" and format_module(e).recognises(columns)]
        assert claiming == ([name, "per-iteration"] if name != "per-iteration" else [name]), name
