"""No import runs upward: every module imports only its own package and packages on lower floors
(`ground.levels.LEVELS`), lazy imports inside functions and `importlib` strings included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ground.levels import LEVELS, PACKAGES

ROOT = Path(__file__).resolve().parent.parent
# a dotted module path inside a string: `importlib.import_module("cli.extract")`, a Beam runner alias
_DOTTED = re.compile(r"^([a-z_]+)(?:\.[A-Za-z_]\w*)+$")


def imported_packages(path: Path, known: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, top-level package) of every project import in `path`, string imports of dotted paths too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _DOTTED.match(node.value)
            if match:
                found.append((node.lineno, match.group(1)))
    return [(line, package) for line, package in found if package in known]


def upward_imports(root: Path, levels: tuple[tuple[str, ...], ...]) -> list[str]:
    """`file:line: a (level i) imports b (level j)` for every import of a package on the same floor or above."""
    known = tuple(package for floor in levels for package in floor)
    level = {package: index for index, floor in enumerate(levels) for package in floor}
    problems = []
    for package in known:
        for path in sorted((root / package).rglob("*.py")):
            for line, imported in imported_packages(path, known):
                if imported != package and level[imported] >= level[package]:
                    problems.append(f"{path.relative_to(root)}:{line}: {package} (level {level[package]}) imports "
                                    f"{imported} (level {level[imported]})")
    return problems


def test_every_package_of_the_project_has_a_floor():
    on_disk = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests", "bench", "tests_verl", "tests_sft"}
    assert on_disk == set(PACKAGES)
    assert len(PACKAGES) == len(set(PACKAGES))
    assert LEVELS[0] == ("schemas",) and LEVELS[-1] == ("cli",)


def test_no_import_runs_upward():
    assert upward_imports(ROOT, LEVELS) == []


def test_schemas_import_nothing_of_the_project():
    problems = [f"{path.relative_to(ROOT)}:{line}: {package}"
                for path in sorted((ROOT / "schemas").rglob("*.py"))
                for line, package in imported_packages(path, PACKAGES) if package != "schemas"]
    assert problems == []


def test_an_upward_import_is_caught(tmp_path):
    """The check itself: a lower floor importing a higher one, lazily, from a sibling, or by string, fails."""
    for package in ("low", "mid", "side", "high"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "low" / "a.py").write_text("def f():\n    from high.x import y\n    return y\n")
    (tmp_path / "mid" / "b.py").write_text("import low.a\nimport side.c\n")
    (tmp_path / "side" / "c.py").write_text("import importlib\nimportlib.import_module('high.x')\n")
    (tmp_path / "high" / "x.py").write_text("from mid.b import z\nimport high.x\n")
    levels = (("low",), ("mid", "side"), ("high",))
    assert upward_imports(tmp_path, levels) == [
        "low/a.py:2: low (level 0) imports high (level 2)",
        "mid/b.py:2: mid (level 1) imports side (level 1)",
        "side/c.py:2: side (level 1) imports high (level 2)",
    ]


def test_the_real_tree_fails_with_an_upward_import_added(tmp_path):
    """Copy a few real packages and add one upward import to the ground floor: the real table catches it."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "ground" / "io.py").write_text((ROOT / "ground" / "io.py").read_text())
    assert upward_imports(tmp_path, LEVELS) == []
    (tmp_path / "ground" / "io.py").write_text((ROOT / "ground" / "io.py").read_text() + "\nfrom synth import gates\n")
    assert [problem.split(": ", 1)[1] for problem in upward_imports(tmp_path, LEVELS)] == [
        "ground (level 1) imports synth (level 6)"]
