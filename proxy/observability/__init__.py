"""What an operator sees: logs, Prometheus metrics, the per-request record, the start
line and secret masking. Must not: change what a request does, or show a secret."""
