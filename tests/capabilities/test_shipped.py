"""The shipped file: carried by the package, identical to the repository's, `toolshim init`."""

from __future__ import annotations

import io
import subprocess
import sys
import tomllib
from pathlib import Path

from proxy.capabilities.shipped import shipped_text
from proxy.commands.init import INIT_CANNOT_WRITE, INIT_EXISTS, INIT_OK, run_init

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_copy_is_the_repository_file_byte_for_byte() -> None:
    # Edit capabilities.yaml at the root, then copy it to proxy/data/ (and if toolshim ran
    # in the clone, `git checkout capabilities.yaml` drops what it learned there).
    assert (ROOT / "proxy" / "data" / "capabilities.yaml").read_bytes() == \
        (ROOT / "capabilities.yaml").read_bytes()
    assert shipped_text() == (ROOT / "capabilities.yaml").read_text()


def test_pip_install_carries_the_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "data/capabilities.yaml" in config["package-data"]["proxy"]


def test_init_creates_refuses_and_forces(tmp_path: Path) -> None:
    path = tmp_path / "new" / "capabilities.yaml"
    out = io.StringIO()
    assert run_init(str(path), False, out) == INIT_OK
    assert path.read_text() == shipped_text()
    path.write_text("version: 1\n")
    assert run_init(str(path), False, out) == INIT_EXISTS
    assert path.read_text() == "version: 1\n"
    assert run_init(str(path), True, out) == INIT_OK
    assert path.read_text() == shipped_text()
    lines = out.getvalue().splitlines()
    assert "created" in lines[0] and "--force" in lines[1] and "replaced" in lines[2]


def test_init_on_an_unwritable_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert run_init(str(blocker / "capabilities.yaml"), False, io.StringIO()) == \
        INIT_CANNOT_WRITE


def test_toolshim_init_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "proxy", "init"], capture_output=True,
                          text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "capabilities.yaml").read_text() == shipped_text()
    again = subprocess.run([sys.executable, "-m", "proxy", "init", "capabilities.yaml"],
                           capture_output=True, text=True, cwd=tmp_path, check=False)
    assert again.returncode == 1 and "already exists" in again.stdout
