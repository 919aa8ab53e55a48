"""The web console at /ui and the JSON API behind it (/admin/models, /admin/requests,
/admin/bench, /admin/validate, /admin/learned/...), plus model validation.

Nothing here is on the chat hot path except `ConsoleState.finished` (O(1) per
request) and the `Tap` an Exchange carries (a few attribute checks).
"""
