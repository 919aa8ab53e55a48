"""Backend edges: what is sent upstream (another backend API included) and how its
answers become ordinary chat chunks. Must not: decide what a client's request
becomes (transforms/ do) or judge a model's answer (the response stages do)."""
