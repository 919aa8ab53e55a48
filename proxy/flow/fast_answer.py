"""A whole answer's fast path: chunks no stage changes skip them, `verbatim` when none did.

Owns `FastCompletionTranslator`, the reference `CompletionTranslator` with the
stages' rebuilding skipped where they vouch nothing would change: a message
that is plain content, and the chunk that only ends it. When no stage changed
or added a thing, and the answer is written as the merge of its chunks would
write it (`plain.as_merged`), the upstream's bytes are handed on as they came
(`verbatim`): a writer of whole answers sends them instead of re-encoding.
The client must get what the reference writes (tests/flow/
test_translate_plain_path.py); `--no-fast-paths` leaves this class out.

Must not: do I/O, read settings, or hand on bytes any stage would have changed.
"""

from __future__ import annotations

from typing import Any

from proxy.flow.plain import as_merged, plain_content, vouched_end
from proxy.flow.translate import ChunkOut, CompletionTranslator
from proxy.transforms.response.completion import completion_to_chunks
from proxy.types import Chunk


class FastCompletionTranslator(CompletionTranslator):
    """A whole upstream chat.completion -> its chunks, plain ones not rebuilt."""

    __slots__ = ()

    def _translated(self, completion: dict[str, Any], raw: bytes) -> list[ChunkOut]:
        out: list[ChunkOut] = []
        as_it_came = as_merged(completion)
        for chunk in completion_to_chunks(completion):
            if self._passes(chunk):
                out.append(chunk)
            else:
                fed = self.pipeline.feed(chunk)
                as_it_came = as_it_came and len(fed) == 1 and fed[0] is chunk
                out.extend(fed)
        closing = self._close()
        if as_it_came and not closing:
            self.verbatim = raw
        return out + closing

    def _passes(self, chunk: Chunk) -> bool:
        """Plain content, or the answer's end, that no stage would change (noted by them)."""
        text = plain_content(chunk, role_ok=True)
        if text is not None:
            return self.pipeline.passes_plain(chunk, text)
        return vouched_end(self.pipeline, chunk)
