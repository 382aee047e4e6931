"""One raw HTTP/1.1 exchange over a socket: bytes sent as they are, the answer read whole."""

from __future__ import annotations

import socket
import time


def exchange(port: int, data: bytes, wait: float = 10) -> tuple[bytes, float]:
    """Send raw bytes; read one whole response, or until the server closes. Returns the
    answer and how long it took."""
    began = time.monotonic()
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(data)
        while not _complete(answer) and (chunk := sock.recv(65536)):
            answer += chunk
    return answer, time.monotonic() - began


def _complete(answer: bytes) -> bool:
    head, found, body = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True
