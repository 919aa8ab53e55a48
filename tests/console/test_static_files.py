"""The console page ships inside the package: every static file is declared package data."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from proxy.console.routes import STATIC

ROOT = Path(__file__).resolve().parents[2]


def test_every_static_file_is_package_data() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["proxy.console"]
    files = sorted(p.relative_to(STATIC.parent).as_posix() for p in STATIC.iterdir())
    assert files == ["static/console.css", "static/console.js", "static/index.html"]
    for name in files:
        assert any(fnmatch.fnmatch(name, g) for g in globs), f"{name} would not be installed"
