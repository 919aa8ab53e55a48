"""The run of one chat request: upstream bytes in, chat chunks out.

`translate` is the sans-IO reference decoder (`feed / end / fail`: upstream
bytes -> chunks and an honest ending); `fast_stream` and `fast_answer` are its
fast paths (off with `--no-fast-paths`), `plain` what they recognise; `turn`
is the `Turn` protocol; `run` is the thin I/O driver (`UpstreamCall`,
`UpstreamTurn`, `ChatRun`). The route builds them in `proxy.flow.chat.run_chat` /
`open_turn`.
"""
