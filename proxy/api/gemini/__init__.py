"""The Gemini API door: request translation, answer translation, the route, the envelope."""
