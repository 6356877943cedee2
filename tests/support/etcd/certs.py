"""A throwaway certificate authority for TLS tests: a server and a client certificate, made with openssl."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

OPENSSL = shutil.which("openssl")


def make(folder: Path, server_ip: str = "127.0.0.1") -> Path:
    """``ca.pem``, ``server.pem``/``server.key`` (for ``server_ip``) and ``client.pem``/``client.key`` in ``folder``."""
    if OPENSSL is None:
        raise RuntimeError("openssl is not installed")
    folder.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([OPENSSL, *args], cwd=folder, check=True, capture_output=True, timeout=30)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=provisioner test CA")
    for name, usage in (("server", "serverAuth,clientAuth"), ("client", "clientAuth")):
        (folder / f"{name}.ext").write_text(f"subjectAltName=IP:{server_ip}\nextendedKeyUsage={usage}\n")
        run("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext")
    return folder
