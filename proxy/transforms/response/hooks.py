"""The fast paths' hooks a response stage may add to `feed`/`flush`: `PlainHooks`.

A stage is `types.Stage` (`feed`, `flush`, `observations`). The translator's
fast paths (proxy/flow/fast_stream.py, fast_answer.py) skip feeding a chunk
when every stage vouches that `feed` would pass it unchanged; a stage vouches
by overriding these hooks. The defaults vouch for nothing, so a stage that
keeps them, or a stage without them (`ResponsePipeline.knows_plain`), makes
the fast paths feed it every chunk: slower, never wrong.

Must not: hold state of its own; every answer here is the stage's to give.
"""

from __future__ import annotations

from proxy.types import Chunk


class PlainHooks:
    """Defaults that vouch for nothing: override them together, keeping their rules."""

    __slots__ = ()

    def plain_ok(self, text: str) -> bool:
        """Would `feed` pass a chunk whose only delta is `{"content": text}` on unchanged,
        holding nothing? Pure: asking changes no state."""
        return False

    def take_plain(self, chunk: Chunk, text: str) -> None:
        """Note such a chunk as `feed` would, without building any output (after
        `plain_ok` said yes for every stage): the translator relays its bytes.
        Notes compose: `take_plain(a, x)` then `take_plain(b, y)` leaves the state
        `take_plain(b, x + y)` leaves."""

    def plain_run_ok(self, texts: list[str], joined: str) -> int:
        """How many of `texts`, from the first, `plain_ok` would say yes to in turn,
        each noted before the next is asked (`joined` is their concatenation). May
        say fewer when unsure, never more."""
        return 0

    def plain_end_ok(self, finish_reason: str) -> bool:
        """Would `feed` pass the chunk that ends the answer (choice 0 alone, an empty
        delta, this finish reason, no usage) on unchanged, and `flush` after it add
        nothing? Pure; asked whatever was fed or taken before."""
        return False

    def take_plain_end(self) -> None:
        """Note that end as `feed` and `flush` would (after `plain_end_ok` said yes for
        every stage): the translator relays the chunk as it is."""
