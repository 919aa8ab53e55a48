"""The package layers of docs/layout.md hold: import-linter checks pyproject.toml's
contracts over the real tree, and the same check fails on a copy given one import
against them (so a green run means the contracts were read and applied)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-c", ("import sys; from importlinter.cli import lint_imports_command;"
                                " sys.exit(lint_imports_command())"), "--no-cache"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_tree_keeps_every_contract() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "line", "named"), [
    # a pure module reaching up to the app
    ("proxy/types.py", "import proxy.app", "proxy.types -> proxy.app"),
    # the flow reaching up to a door
    ("proxy/flow/retry.py", "import proxy.api.body", "proxy.flow.retry -> proxy.api.body"),
    # one dialect using another's code
    ("proxy/api/gemini/answer.py", "import proxy.api.messages.events",
     "proxy.api.gemini.answer -> proxy.api.messages.events"),
])
def test_an_import_against_the_layers_fails_the_check(tmp_path: Path, module: str, line: str,
                                                       named: str) -> None:
    shutil.copytree(ROOT / "proxy", tmp_path / "proxy",
                    ignore=shutil.ignore_patterns("__pycache__", "static", "data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}  # against the layers\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert named in done.stdout, done.stdout


def test_every_top_level_module_has_a_layer() -> None:
    # import-linter leaves a module no layer names unchecked: a new one must be placed.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    placed = {name.strip() for line in layers for name in line.split("|")}
    present = {f"proxy.{p.stem}" for p in (ROOT / "proxy").iterdir()
               if (p.suffix == ".py" and p.stem != "__init__")
               or (p.is_dir() and (p / "__init__.py").exists())}
    assert present <= placed, sorted(present - placed)


def test_no_module_is_over_400_lines() -> None:
    # A module past 400 lines holds more than one job: split it where its jobs part.
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "proxy").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long
