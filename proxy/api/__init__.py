"""Client-facing API shapes other than chat completions, translated at the edges of the chat flow."""
