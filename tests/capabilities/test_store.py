"""CapabilityStore: reload on change, last good version kept, safe writes of `learned:`."""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import re
import signal
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.capabilities.learning import LearnedFact
from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.schema import Capabilities
from proxy.capabilities.shipped import shipped_text
from proxy.capabilities.splice import splice_learned
from proxy.capabilities.store import CapabilityStore

AT = "2026-11-22T10:00:00Z"
BASE = """\
# capabilities for the test rig
version: 1   # schema version

defaults:
  tools: auto        # try natively first
  max_tools: 64

models:
  "gemma3:*":
    tools: 'off'
  # the person's favourite
  qwen3*:
    tools: "native"
    deny_tools: [read_file]
"""


def fact(model: str = "custom:latest", **fields: Any) -> LearnedFact:
    return LearnedFact(
        model, fields or {"tools": "off"}, "runtime_error", AT,
        f"{model} does not support tools", None,
    )


def load(path: Path) -> Capabilities:
    caps, problems = parse_capabilities(path.read_text(), str(path))
    assert caps is not None, problems
    return caps


@pytest.fixture
def cap_file(tmp_path: Path) -> Path:
    path = tmp_path / "capabilities.yaml"
    path.write_text(BASE)
    return path


# --- splicing keeps the person's bytes -------------------------------------

_COMMENT = st.text(st.characters(codec="ascii", categories=["L", "N", "Zs"]), max_size=20).map(
    lambda t: f"# {t}\n"
)
_BLANK = st.sampled_from(["\n", "  \n"])
_GAP = st.lists(st.one_of(_COMMENT, _BLANK), max_size=3).map("".join)
_KEY = st.sampled_from(["gemma3:*", "qwen3*", "llama3.2*", "phi4:latest", "old:1b"])
_QUOTED = st.sampled_from(['"{}"', "'{}'", "{}"])
_TOOLS = st.sampled_from(["off", "'off'", '"native"', "auto   # why not", "emulate"])


@st.composite
def _models(draw: st.DrawFn) -> str:
    keys = draw(st.lists(_KEY, unique=True, max_size=3))
    body = "".join(
        draw(_GAP).replace("# ", "  # ") + "  " + draw(_QUOTED).format(k)
        + f":\n    tools: {draw(_TOOLS)}\n"
        for k in keys
    )
    return "models:" + draw(st.sampled_from(["", "   # yours"])) + "\n" + body if body else "models: {}\n"


@st.composite
def _learned(draw: st.DrawFn) -> str:
    keys = draw(st.lists(st.sampled_from(["custom:latest", "other:7b", "x:latest"]),
                         unique=True, max_size=2))
    key = draw(st.sampled_from(["learned", '"learned"', "'learned'"]))
    head = key + ":" + draw(st.sampled_from(["", "  # the proxy's", " {}"])) + "\n"
    if head.endswith(": {}\n"):
        return head
    return head + "".join(
        f"  {draw(_QUOTED).format(k)}:\n    tools: off\n    source: probe\n    at: \"{AT}\"\n"
        + draw(st.sampled_from(["", "    # an indented note\n"]))
        for k in keys
    )


@st.composite
def documents(draw: st.DrawFn) -> tuple[list[str], int | None]:
    """Top-level sections (each with leading comments/blank lines) and learned's index."""
    sections = [
        draw(st.sampled_from(["version: 1\n", "version: 1  # v\n", '"version": 1\n'])),
        "defaults:\n  tools: " + draw(_TOOLS) + "\n",
        draw(_models()),
    ]
    sections = draw(st.permutations(sections))
    where = draw(st.one_of(st.none(), st.integers(0, len(sections))))
    if where is not None:
        sections.insert(where, draw(_learned()))
    sections = [draw(_GAP) + s for s in sections]
    if draw(st.booleans()):
        sections[-1] = sections[-1].rstrip("\n")
    return sections, where


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from(["custom:latest", "new", "x"]),
       st.sampled_from([{"tools": "emulate"}, {"drop_tool_choice": ["required"]}]))
def test_splice_keeps_every_byte_outside_learned(
    doc: tuple[list[str], int | None], model: str, fields: dict[str, Any]
) -> None:
    sections, where = doc
    text = "".join(sections)
    before, problems = parse_capabilities(text, "c.yaml")
    assert before is not None, (problems, text)
    new = splice_learned(text, [fact(model, **fields)])
    if where is None:
        assert new.startswith(text)
    else:
        learned = sections[where]
        key_at = re.search(r"^[\"']?learned", learned, re.MULTILINE).start()  # type: ignore[union-attr]
        assert new.startswith("".join(sections[:where]) + learned[:key_at])
        assert new.endswith("".join(sections[where + 1:]))
    after, problems = parse_capabilities(new, "c.yaml")
    assert after is not None, (problems, new)
    assert after.model_copy(update={"learned": {}}) == before.model_copy(update={"learned": {}})
    name = model if ":" in model else model + ":latest"
    entry = after.learned[name].model_dump(exclude_unset=True)
    assert {k: entry[k] for k in fields} == fields
    assert (entry["source"], entry["at"]) == ("runtime_error", AT)
    for other in before.learned:
        assert other in after.learned


def test_splice_into_the_shipped_file() -> None:
    shipped = Path(__file__).parents[2] / "capabilities.yaml"
    text = shipped.read_text()
    before = parse_capabilities(text, str(shipped))[0]
    new = splice_learned(text, [fact("custom")])
    after = parse_capabilities(new, str(shipped))[0]
    assert before is not None and after is not None
    assert after.model_copy(update={"learned": {}}) == before.model_copy(update={"learned": {}})
    assert after.learned["custom:latest"].tools == "off"
    start = re.search(r"^learned:", text, re.MULTILINE)
    assert start is not None and new.startswith(text[: start.start()])


def test_learned_entry_shape_survives_later_writes(cap_file: Path) -> None:
    store = CapabilityStore(cap_file)
    store.record([fact("custom-model", tools="off")])
    first = (
        "learned:\n"
        '  "custom-model:latest":\n'
        "    tools: off\n"
        "    source: runtime_error\n"
        f'    at: "{AT}"\n'
        "    evidence: custom-model does not support tools\n"
    )
    assert cap_file.read_text() == BASE + first
    store.record([fact("b:7b", drop_tool_choice=["required"])])
    assert cap_file.read_text() == BASE + first + (
        '  "b:7b":\n'
        "    drop_tool_choice: [required]\n"
        "    source: runtime_error\n"
        f'    at: "{AT}"\n'
        "    evidence: b:7b does not support tools\n"
    )


def test_merging_into_existing_entry_unions_lists_and_refreshes_provenance(cap_file: Path) -> None:
    store = CapabilityStore(cap_file)
    store.record([fact("m", drop_tool_choice=["required"])])
    later = LearnedFact("m", {"drop_tool_choice": ["function"]}, "runtime_error",
                        "2026-11-23T00:00:00Z", None, "http://vllm:8000")
    store.record([later])
    entry = load(cap_file).learned["m:latest"]
    assert entry.drop_tool_choice == ["required", "function"]
    assert (entry.at, entry.evidence, entry.upstream) == (later.at, None, "http://vllm:8000")


# --- in memory --------------------------------------------------------------


def test_fact_applies_to_next_profile_and_repeat_is_not_rewritten(cap_file: Path) -> None:
    store = CapabilityStore(cap_file, check_interval=0)
    assert store.profile("custom").tools == "auto"
    store.record([fact("custom")])
    assert store.profile("custom").tool_support == "refused"
    assert store.has_entry("custom")
    mtime = cap_file.stat().st_mtime_ns
    generation = store.generation
    store.record([fact("custom")])
    assert cap_file.stat().st_mtime_ns == mtime
    assert store.generation == generation


def test_persons_models_entry_still_wins(cap_file: Path) -> None:
    store = CapabilityStore(cap_file)
    store.record([fact("qwen3:8b", tools="off")])
    assert store.profile("qwen3:8b").tools == "native"
    assert "qwen3:8b" in load(cap_file).learned


def test_fact_the_schema_rejects_is_not_learned(cap_file: Path) -> None:
    store = CapabilityStore(cap_file)
    store.record([fact("m", tool_format="no-such-format")])
    assert cap_file.read_text() == BASE
    assert store.profile("m").tool_format is None


# --- reload -------------------------------------------------------------------


def test_reload_picks_up_a_change(cap_file: Path) -> None:
    store = CapabilityStore(cap_file, check_interval=0)
    first = store.profile("phi4")
    assert store.profile("phi4") is first  # cached
    cap_file.write_text(BASE + '  "phi4*":\n    max_tools: 4\n')
    os.utime(cap_file, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert store.profile("phi4").max_tools == 64  # a request never pays for the parse
    assert store.reload_if_changed() is True
    assert store.profile("phi4").max_tools == 4
    assert store.generation == 2
    assert store.reload_if_changed() is False


def test_broken_edit_keeps_last_good_until_fixed(
    cap_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = CapabilityStore(cap_file, check_interval=0)
    broken = BASE.replace("max_tools: 64", "max_tools: lots")
    cap_file.write_text(broken)
    with caplog.at_level(logging.WARNING):
        assert store.reload_if_changed() is False
        assert store.profile("qwen3").tools == "native"
        os.utime(cap_file, ns=(time.time_ns(), time.time_ns() + 10**9))
        assert store.reload_if_changed() is False  # same broken content again
    error = store.last_error()
    assert error is not None and error.startswith(f"{cap_file}:6: ")
    assert len([r for r in caplog.records if "max_tools" in r.getMessage()]) == 1
    assert store.capabilities().defaults.max_tools == 64
    cap_file.write_text(BASE.replace("max_tools: 64", "max_tools: 9"))
    os.utime(cap_file, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    assert store.reload_if_changed() is True
    assert store.profile("x").max_tools == 9
    assert store.last_error() is None


def test_missing_file_is_created_from_the_shipped_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "capabilities.yaml"
    with caplog.at_level(logging.INFO):
        store = CapabilityStore(path, check_interval=0, create_missing=True)
        store.reload_if_changed()
    assert path.read_text() == shipped_text()
    assert [(r.levelno, str(path) in r.getMessage()) for r in caplog.records] == [
        (logging.INFO, True)]
    assert store.last_error() is None
    assert store.profile("gemma3:4b").tools == "emulate"  # a shipped entry is in force
    store.record([fact("m")])
    assert load(path).learned["m:latest"].tools == "off"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# --- writes ---------------------------------------------------------------------


def test_persons_edit_between_load_and_write_is_kept(cap_file: Path) -> None:
    store = CapabilityStore(cap_file, check_interval=3600)
    edited = BASE + '  "mistral*":\n    tool_format: mistral\n'
    cap_file.write_text(edited)
    store.record([fact("custom")])
    text = cap_file.read_text()
    assert text.startswith(edited)
    assert "custom:latest" in load(cap_file).learned
    assert store.profile("mistral:7b").tool_format == "mistral"


def test_invalid_file_on_disk_is_never_clobbered(cap_file: Path) -> None:
    store = CapabilityStore(cap_file, check_interval=3600)
    half_done = BASE + "  llama3*:\n    max_tools: [\n"
    cap_file.write_text(half_done)
    store.record([fact("custom")])
    assert cap_file.read_text() == half_done
    assert store.profile("custom").tool_support == "refused"
    cap_file.write_text(BASE)
    store.record([fact("other")])  # the fact kept in memory is written with the next one
    assert {"custom:latest", "other:latest"} <= set(load(cap_file).learned)


def test_read_only_file_keeps_fact_in_memory_and_logs_once(
    cap_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cap_file.chmod(0o444)
    store = CapabilityStore(cap_file)
    with caplog.at_level(logging.WARNING):
        store.record([fact("a")])
        store.record([fact("b")])
    assert cap_file.read_text() == BASE
    assert store.profile("a").tool_support == "refused" and store.profile("b").tool_support == "refused"
    assert len(caplog.records) == 1 and "read-only" in caplog.records[0].getMessage()


def test_disk_full_keeps_fact_in_memory(
    cap_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    store = CapabilityStore(cap_file)
    with caplog.at_level(logging.WARNING):
        store.record([fact("a")])
        store.record([fact("b")])
    assert cap_file.read_text() == BASE
    assert store.profile("b").tool_support == "refused"
    assert len(caplog.records) == 1
    assert [p.name for p in cap_file.parent.iterdir() if p.suffix == ".tmp"] == []


def test_file_mode_is_kept(cap_file: Path) -> None:
    cap_file.chmod(0o640)
    CapabilityStore(cap_file).record([fact()])
    assert stat.S_IMODE(cap_file.stat().st_mode) == 0o640


def test_appends_learned_when_file_lacks_final_newline(cap_file: Path) -> None:
    cap_file.write_text(BASE.rstrip("\n"))
    CapabilityStore(cap_file).record([fact()])
    text = cap_file.read_text()
    assert text.startswith(BASE + "learned:\n")


# A person's file with Windows line endings, learned: between two of their sections.
_LEARNED_BETWEEN = (
    "learned:\n"
    '  "old:1b":\n'
    "    tools: off\n"
    "    source: probe\n"
    f'    at: "{AT}"\n'
)
_AFTER = "\n# the person's closing notes\nserver_tools: {}\n"


def test_a_crlf_file_keeps_its_crlfs_through_a_learned_write(cap_file: Path) -> None:
    crlf = (BASE + "\n" + _LEARNED_BETWEEN + _AFTER).replace("\n", "\r\n").encode()
    cap_file.write_bytes(crlf)
    CapabilityStore(cap_file).record([fact()])
    written = cap_file.read_bytes()
    assert written.startswith(crlf.partition(b"learned:")[0] + b"learned:\r\n")
    assert written.endswith(_AFTER.replace("\n", "\r\n").encode())
    assert b'"custom:latest"' in written and b'"old:1b"' in written
    # One line ending throughout: the learned lines are written with the file's own.
    assert written.count(b"\n") == written.count(b"\r\n")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from(["\n", "\r\n"]))
def test_splice_writes_the_files_own_line_ending(
        doc: tuple[list[str], int | None], newline: str) -> None:
    sections, where = [s.replace("\n", newline) for s in doc[0]], doc[1]
    text = "".join(sections)
    new = splice_learned(text, [fact("custom:latest", tools="emulate")])
    if where is None:
        assert new.startswith(text)
    else:
        assert new.startswith("".join(sections[:where]))
        assert new.endswith("".join(sections[where + 1:]))
    # Every line ends with the file's own ending: no CRLF in an LF file, no bare LF in
    # a CRLF one.
    assert set(re.findall(r"\r?\n", new)) == {newline}, new
    assert parse_capabilities(new, "c.yaml")[0] is not None


# --- several processes ------------------------------------------------------------


def _learn_one(path: str, model: str, start: Any) -> None:
    start.wait()
    CapabilityStore(path, check_interval=3600).record([fact(model)])


def test_eight_processes_learning_at_once_lose_nothing(cap_file: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_learn_one, args=(str(cap_file), f"m{i}", start))
             for i in range(8)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    text = cap_file.read_text()
    assert text.startswith(BASE)
    assert set(load(cap_file).learned) == {f"m{i}:latest" for i in range(8)}


def _learn_forever(path: str, first: int, ready: Any) -> None:
    store = CapabilityStore(path, check_interval=3600)
    for i in range(first, first + 100_000):
        store.record([fact(f"k{i}")])
        ready.set()


def test_kill_mid_write_leaves_a_whole_file(cap_file: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    first = 0
    for _ in range(3):
        ready = ctx.Event()
        proc = ctx.Process(target=_learn_forever, args=(str(cap_file), first, ready))
        proc.start()
        assert ready.wait(60)
        time.sleep(random.uniform(0, 0.05))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        text = cap_file.read_text()
        assert text.startswith(BASE)
        learned = set(load(cap_file).learned)
        first = len(learned)
        assert learned == {f"k{i}:latest" for i in range(first)}
