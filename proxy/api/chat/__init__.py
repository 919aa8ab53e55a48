"""The OpenAI chat dialect: POST /v1/chat/completions (`request` parses, `route` answers)."""
