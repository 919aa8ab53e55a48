from __future__ import annotations

import io
from pathlib import Path

from proxy.commands.check import check_text, run_check


def run(path: Path | str) -> tuple[int, list[str]]:
    out = io.StringIO()
    status = run_check(str(path), out)
    return status, out.getvalue().splitlines()


def test_clean_file_says_ok(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text('version: 1\nmodels:\n  "qwen3*":\n    tools: native\n')
    assert run(path) == (0, [f"{path}: ok"])


def test_empty_file_is_ok(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text("# nothing yet\n")
    assert run(path) == (0, [f"{path}: ok"])


def test_each_problem_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text("defaults:\n  tools: nope\nmodels:\n  x:\n    toolz: 1\n")
    status, lines = run(path)
    assert status == 1
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}:2: defaults.tools: ")
    assert lines[1] == f"{path}:5: models.x.toolz: unknown key 'toolz'; did you mean 'tools'?"


def test_learned_only_key_under_models_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text('models:\n  x:\n    tools: off\n    source: probe\n')
    said = f"{path}:4: models.x.source: key 'source' is only valid under learned: "
    assert run(path) == (1, [said + "(the proxy's bookkeeping)"])


def test_yaml_error_fails(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("defaults:\n  tools: [off\n")
    status, lines = run(path)
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(f"{path}:3: YAML")


def test_missing_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    status, lines = run(path)
    assert status == 1
    assert lines == [f"{path}: cannot read: No such file or directory"]


def test_directory_fails(tmp_path: Path) -> None:
    status, lines = run(tmp_path)
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(f"{tmp_path}: cannot read: ")


def test_undecodable_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"defaults:\n  tools: \xff\xfe\n")
    status, lines = run(path)
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(f"{path}: cannot read: ")


def test_check_text_returns_problems_with_the_given_path() -> None:
    assert check_text("version: 1\n", "a.yaml") == []
    problems = check_text("version: 2\n", "a.yaml")
    assert [(p.path, p.line) for p in problems] == [("a.yaml", 1)]
