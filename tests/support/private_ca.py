"""A private CA made for the test (trustme) and a fake backend served over TLS with a
certificate it signed, on loopback: an upstream behind a company's own CA."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from support.servers import serve


@dataclass(frozen=True)
class TlsFront:
    url: str
    """https://127.0.0.1:PORT"""
    ca_file: str
    """PEM of the CA that signed its certificate: what --ca-bundle is given."""


def server_context(where: Path) -> tuple[ssl.SSLContext, str]:
    """A server TLS context for 127.0.0.1 signed by a CA made here, and that CA's PEM file."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    ca_file = where / "proxy-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return context, str(ca_file)


@contextmanager
def tls_front(app: Any, where: Path) -> Iterator[TlsFront]:
    """Serve `app` over https with a certificate for 127.0.0.1 and localhost that only
    a CA made here vouches for."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    key_file, cert_file, ca_file = where / "server.key", where / "server.pem", where / "ca.pem"
    cert.private_key_pem.write_to_path(str(key_file))
    for i, blob in enumerate(cert.cert_chain_pems):
        blob.write_to_path(str(cert_file), append=i > 0)
    ca.cert_pem.write_to_path(str(ca_file))
    with serve(app, lifespan="off", tls=(str(key_file), str(cert_file))) as url:
        yield TlsFront(url, str(ca_file))
