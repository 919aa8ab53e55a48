"""The Anthropic Messages API door: request translation, answer events, route, envelope."""
