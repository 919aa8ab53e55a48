"""Message `content` values: a string, a list of content parts, or None.

Owns reading and extending content without losing parts the client sent
(images stay where they were). Must not know about roles or tools.
"""

from __future__ import annotations

from typing import Any, Literal

Content = Any
"""str | list of `{"type": "text", "text": ...}` and other parts | None."""


def content_text(content: Content) -> str:
    """The text of `content`; non-text parts are left out."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"] for part in content
            if isinstance(part, dict) and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def _parts(content: Content) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    return []


def add_text(content: Content, text: str, at: Literal["start", "end"]) -> Content:
    """`content` with `text` added at the start or end, a blank line between."""
    if not text:
        return content
    if isinstance(content, list):
        part = {"type": "text", "text": text}
        return [part, *content] if at == "start" else [*content, part]
    if not isinstance(content, str) or not content:
        return text
    return f"{text}\n\n{content}" if at == "start" else f"{content}\n\n{text}"


def join_contents(first: Content, second: Content) -> Content:
    """Two messages' contents as one: strings joined by a blank line, else parts."""
    if isinstance(first, list) or isinstance(second, list):
        return [*_parts(first), *_parts(second)]
    texts = [c for c in (first, second) if isinstance(c, str) and c]
    return "\n\n".join(texts)
