"""`toolshim validate`: the battery from the command line, recorded in capabilities.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML
from support.battery import good_answers, script, weak_answers
from support.fake_ollama import FakeOllama, Reply
from support.servers import free_port

from proxy.cli import main


def _args(fake_url: str, caps_path: Path, *models: str) -> list[str]:
    return ["validate", *models, "--upstream", fake_url, "--capabilities", str(caps_path),
            "--no-probe"]


def test_validate_prints_each_check_and_records_the_result(
        fake: FakeOllama, fake_url: str, caps_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    caps_path.write_text("# mine\nversion: 1\n")
    script(fake, "qwen3:8b", good_answers())
    assert main(_args(fake_url, caps_path, "qwen3:8b")) == 0
    out = capsys.readouterr().out
    assert "qwen3:8b: 6/6 passed, rung native" in out
    assert out.count("  pass  ") == 6
    text = caps_path.read_text()
    assert text.startswith("# mine\nversion: 1\n")
    validation = YAML(typ="safe").load(text)["learned"]["qwen3:8b"]["validation"]
    assert validation["passed"] == 6 and validation["failed"] == []


def test_validate_all_fails_when_a_model_fails_a_check(
        fake: FakeOllama, fake_url: str, caps_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    script(fake, "qwen3:8b", weak_answers())
    assert main(_args(fake_url, caps_path) + ["--all"]) == 1
    out = capsys.readouterr().out
    assert "qwen3:8b: 1/6 passed" in out and "FAIL  single_call" in out
    assert "gemma3:4b: " in out  # --all: every listed model
    learned = YAML(typ="safe").load(caps_path.read_text())["learned"]
    assert learned["qwen3:8b"]["validation"]["failed"][0] == "single_call"
    assert learned["gemma3:4b"]["validation"]["rung"] == "emulate"  # the shipped fallback


def test_validate_of_a_model_no_upstream_has_records_nothing(
        fake: FakeOllama, fake_url: str, caps_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    caps_path.write_text("# mine\nversion: 1\n")
    script(fake, "qwen3:8b", good_answers())
    assert main(_args(fake_url, caps_path, "nowhere:1b", "qwen3:8b")) == 1
    out = capsys.readouterr().out
    assert "nowhere:1b: The model `nowhere:1b` does not exist" in out
    assert "qwen3:8b: 6/6 passed" in out  # the next model is still validated
    assert set(YAML(typ="safe").load(caps_path.read_text())["learned"]) == {"qwen3:8b"}


def test_validate_needs_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["validate"])
    assert exit_.value.code == 2 and "name a MODEL" in capsys.readouterr().err


EARLIER = """# mine
version: 1
learned:
  "qwen3:8b":
    source: observed
    at: "2026-11-20T10:00:00Z"
    evidence: toolshim validate
    validation: {at: "2026-11-20T10:00:00Z", passed: 5, total: 6, failed: [two_calls], rung: native}
"""


def test_validate_against_a_backend_that_is_down_records_nothing(
        caps_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    caps_path.write_text(EARLIER)
    dead = f"http://127.0.0.1:{free_port()}"
    assert main(_args(dead, caps_path, "qwen3:8b")) == 1
    out = capsys.readouterr().out
    assert out.startswith("qwen3:8b: not validated, nothing recorded: the backend failed "
                          "6 of 6 checks (single_call: HTTP 502: ")
    assert caps_path.read_text() == EARLIER  # the real earlier score stands


def test_validate_with_a_backend_5xx_midway_records_nothing(
        fake: FakeOllama, fake_url: str, caps_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    caps_path.write_text(EARLIER)
    broken = Reply(status=500, body=b'{"error":{"message":"llama runner process has '
                   b'terminated: signal: killed","type":"api_error","param":null,'
                   b'"code":null}}\n')
    script(fake, "qwen3:8b", good_answers()[:1] + [broken] + good_answers()[2:])
    assert main(_args(fake_url, caps_path, "qwen3:8b")) == 1
    out = capsys.readouterr().out
    assert "the backend failed 1 of 6 checks (no_call: HTTP 500: " in out
    assert "runner process has terminated" in out
    assert caps_path.read_text() == EARLIER
