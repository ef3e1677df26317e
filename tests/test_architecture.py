"""docs/architecture.md's rules, checked against the code: which package may import which, no
private name reached across packages from bench/, and no module over the size STYLE.md asks a
split before (unless the architecture page names it and says why).

The imports are read with ``ast`` (every ``import`` and ``from … import``, type-only ones
included: a type import is a dependency too), so the table below is the one the page prints.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "weavehost"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_MODULE_LINES = 600

# The layers of docs/architecture.md's "may import" column: a package (or a top-level module)
# and what of weavehost it may import besides itself. ``paths`` is a leaf every layer may use.
MAY_IMPORT: dict[str, set[str]] = {
    "engine": {"errors", "paths"},
    "formats": {"engine", "gguf", "errors"},
    "decode": {"engine", "formats", "errors", "paths"},
    "mcp": {"config", "errors", "paths"},
    "agent": {"decode", "formats", "engine", "mcp", "config", "config_model", "errors", "paths"},
    "gguf": {"errors"},
    "errors": set(),
    "paths": set(),
    "config_check": {"errors"},
    "config_servers": {"config_check", "errors"},
    "config_model": {"config_check", "errors"},
    "config": {"config_check", "config_model", "config_servers", "errors"},
    "cli_options": {"config", "errors"},
    "models": {"decode", "engine", "formats", "gguf", "lineup", "packages", "errors", "paths"},
    "lineup": {"packages"},
    "packages": {"engine", "errors"},
}


def _layer(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imports(path: Path) -> list[tuple[str, str]]:
    """(imported module, imported name or '') for each weavehost import in ``path``."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("weavehost."):
                found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("weavehost.")]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_each_layer_imports_only_what_the_architecture_page_allows(layer: str) -> None:
    wrong = []
    for path in _modules():
        if _layer(path) != layer:
            continue
        for module, _ in _imports(path):
            target = module.split(".")[1]
            if target != layer and target not in MAY_IMPORT[layer]:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert wrong == []


def test_the_benchmarks_reach_no_private_name_of_another_package() -> None:
    private = [
        f"{path.relative_to(ROOT)} imports {module}.{name}"
        for path in _modules()
        if _layer(path) == "bench"
        for module, name in _imports(path)
        if module.split(".")[1] != "bench" and name.startswith("_")
    ]
    assert private == []


def test_no_module_is_over_the_size_style_asks_a_split_before_unless_the_page_says_why() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    explained = set(re.findall(r"`(weavehost/[\w/]+\.py)` \(\d+ lines", page))
    long = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES
    ]
    assert [p for p in long if p not in explained] == []


# The architecture issue's check, as a test: a module-level dict or weak map, or a cache keyed by
# a model's file path, is learned state shared by every model in the process.
LEARNED_AT_MODULE_LEVEL = re.compile(
    r'^_[A-Z_]* *[:=].*\{\}|WeakKeyDictionary|getattr\(engine, "path"'
)


def test_no_module_of_the_decoder_keeps_what_it_learns_about_a_model_at_module_level() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((PACKAGE / "decode").glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if LEARNED_AT_MODULE_LEVEL.search(line)
    ]
    assert found == []
