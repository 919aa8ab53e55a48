"""The `toolshim` command as people run it: a subprocess, its output and exit status."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import proxy
from proxy.cli import _COMMANDS

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSHIM_")}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "proxy", *argv], capture_output=True,
                          text=True, timeout=60, check=False, env=environ, cwd=ROOT)


def test_help_lists_every_subcommand() -> None:
    result = _run("--help")
    assert result.returncode == 0
    for command in _COMMANDS:
        assert f"toolshim {command}" in result.stdout or f"[{command}]" in result.stdout, command


def test_version_is_the_packages() -> None:
    result = _run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"toolshim {proxy.__version__}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]  # read from proxy.__version__


@pytest.mark.parametrize("argv", [
    ("--prot", "9000"),  # once taken for --protect-metrics
    ("--upstr", "http://127.0.0.1:1"),
    ("probe", "--al"),
    ("validate", "--al"),
    ("init", "--forc"),
])
def test_abbreviated_flags_are_refused(argv: tuple[str, ...]) -> None:
    result = _run(*argv)
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr


@pytest.mark.parametrize(("argv", "env", "named", "not_named"), [
    (("--upstream", "ftp://nowhere"), {}, "--upstream", "TOOLSHIM_UPSTREAM"),
    ((), {"TOOLSHIM_UPSTREAM": "ftp://nowhere"}, "TOOLSHIM_UPSTREAM", "--upstream"),
    (("--port", "0"), {}, "--port", "TOOLSHIM_PORT"),
    ((), {"TOOLSHIM_PORT": "0"}, "TOOLSHIM_PORT", "--port"),
    (("--route", "x=ftp://nowhere"), {}, "--route", "TOOLSHIM_ROUTES"),
    (("--allowed-hosts", "evil.example:8080"), {}, "--allowed-hosts", "TOOLSHIM_"),
])
def test_a_bad_value_is_named_as_it_was_given(argv: tuple[str, ...], env: dict[str, str],
                                              named: str, not_named: str) -> None:
    result = _run(*argv, env=env)
    assert result.returncode == 2
    assert named in result.stderr and not_named not in result.stderr


@pytest.mark.parametrize("argv", [("--prot", "9000"), ("--port", "eighty"), ("probe",),
                                  ("--upstream", "ftp://x")])
def test_a_usage_error_is_one_line_and_a_hint(argv: tuple[str, ...]) -> None:
    result = _run(*argv)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("toolshim") and ": error: " in lines[0]
    assert "--help" in lines[1]
    assert "usage:" not in result.stderr


def test_a_bad_env_value_under_check_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    result = _run("check", env={"TOOLSHIM_PORT": "eighty"})
    assert result.returncode == 2
    assert "TOOLSHIM_PORT" in result.stderr and "Traceback" not in result.stderr
