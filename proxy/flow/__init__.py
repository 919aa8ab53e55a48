"""The run of one chat request: upstream bytes in, chat chunks out.

`translate` is sans-IO (`feed / end / fail`: upstream bytes -> chunks and an
honest ending); `run` is the thin I/O driver (`UpstreamCall`, `Turn`,
`ChatRun`). The route builds them in `proxy.flow.chat.run_chat` / `open_turn`.
"""
