"""Backend edges: what is sent upstream (another backend API included) and how its
answers become ordinary chat chunks."""
