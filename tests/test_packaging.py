"""What people run from outside: the console script, the image, the README commands."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _dockerfile() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_image_runs_non_root_on_8080_with_a_healthcheck() -> None:
    instructions = _dockerfile()
    users = [rest for word, rest in instructions if word == "USER"]
    assert users and users[-1] not in {"root", "0"}
    env = " ".join(rest for word, rest in instructions if word == "ENV")
    assert "TOOLSHIM_HOST=0.0.0.0" in env and "TOOLSHIM_PORT=8080" in env
    assert ("EXPOSE", "8080") in instructions
    health = [rest for word, rest in instructions if word == "HEALTHCHECK"]
    assert health and "/healthz" in health[0]
    assert any(word == "ENTRYPOINT" and "toolshim" in rest for word, rest in instructions)
    assert instructions[0][0] == "FROM" and "slim" in instructions[0][1]


def test_console_script_and_package_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "toolshim"
    assert project["scripts"]["toolshim"] == "proxy.cli:main"


def test_python_m_proxy_is_the_same_program() -> None:
    shown = subprocess.run([sys.executable, "-m", "proxy", "--help"], capture_output=True,
                           text=True, check=True, cwd=ROOT).stdout
    for flag in ("--host", "--port", "--upstream", "--capabilities"):
        assert flag in shown


def test_toolshim_check_on_the_shipped_file() -> None:
    done = subprocess.run([sys.executable, "-m", "proxy", "check", "capabilities.yaml"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"```bash\n(pip install \"\.\[test\]\" && (python -m pytest))\n```", readme)
    assert command is not None
    assert command.group(2) in (ROOT / ".ci" / "run").read_text()
