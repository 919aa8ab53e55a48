"""The OpenAI Responses dialect: /v1/responses (`request` to chat form, `events` the answer, `route`, `store` for previous_response_id, `tools` for Codex's custom and local_shell tools)."""
