"""nginx as a reference hop for `run.py --nginx`: its config, and nothing that needs
the load generator's libraries (the smoke test imports this without them)."""

from __future__ import annotations

from pathlib import Path

# One process (no master), so the probe's CPU and RSS are the one that relays; a
# keep-alive pool to the fake, as toolshim's transport keeps; streams unbuffered.
NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {dir}; proxy_temp_path {dir};
  upstream fake {{ server {upstream}; keepalive 256; }}
  server {{
    listen 127.0.0.1:{port};
    location = /healthz {{ return 200 "ok"; }}
    location / {{
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
"""


def write_nginx_conf(into: Path, port: int, upstream: str) -> Path:
    """`into`/nginx.conf for nginx listening on `port` and relaying to `upstream`."""
    into.mkdir(parents=True, exist_ok=True)
    host_port = upstream.removeprefix("http://").rstrip("/")
    conf = NGINX_CONF.format(dir=into, port=port, upstream=host_port)
    (into / "nginx.conf").write_text(conf)
    return into
