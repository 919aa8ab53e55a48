"""The edge in front of every HTTP request (edge.py), with the shutdown drain it runs
requests under (drain.py) and the key rules of the three doors (keys.py)."""
