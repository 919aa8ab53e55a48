"""Backend edges: what is sent upstream and how its answers are made ordinary."""
