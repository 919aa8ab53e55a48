"""write.py: the locked atomic writer every write of capabilities.yaml goes through."""

from __future__ import annotations

import os
from pathlib import Path

from proxy.capabilities.write import rewrite_file as rewrite


def test_a_symlinked_file_stays_a_symlink_and_its_target_is_replaced(tmp_path: Path) -> None:
    real = tmp_path / "config" / "capabilities.yaml"
    real.parent.mkdir()
    real.write_text("version: 1\n")
    link = tmp_path / "capabilities.yaml"
    link.symlink_to(real)
    done = rewrite(link, lambda text: (text or "") + "learned: {}\n")
    assert done is not None and done.changed
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "version: 1\nlearned: {}\n"
    assert [p.name for p in real.parent.iterdir() if p.suffix == ".tmp"] == []


def test_edit_sees_the_current_text_and_may_leave_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    seen: list[str | None] = []
    assert rewrite(path, lambda text: seen.append(text)) is None  # type: ignore[func-returns-value]
    assert seen == [None] and not path.exists()
    rewrite(path, lambda text: "version: 1\n")
    assert rewrite(path, lambda text: text) is not None
    assert path.read_text() == "version: 1\n"
