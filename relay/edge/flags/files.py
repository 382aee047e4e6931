"""The files an operator points a relay at (offline mode's bootstrap file, Unleash Edge's
backup files), read whole and bounded. Only a regular file is read: a named pipe, a socket
or a device in its place (a careless mount, a swapped file) has no end, and reading one on
the event loop would block the process for good; it is opened without waiting and refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

CHUNK = 1024 * 1024


class NotReadable(ValueError):
    """The file cannot be read: the message names it and why, never its content."""


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The content of the regular file at ``path`` (``NotReadable`` when it is missing, not a
    regular file, or larger than ``max_bytes``)."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise NotReadable(f"{path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotReadable(f"{path}: not a regular file")
        chunks: list[bytes] = []
        read = 0
        # in chunks, not read(max_bytes + 1): that allocates the bound whatever the size
        while read <= max_bytes and (chunk := os.read(fd, min(CHUNK, max_bytes + 1 - read))):
            chunks.append(chunk)
            read += len(chunk)
    except OSError as exc:
        raise NotReadable(f"{path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if read > max_bytes:
        raise NotReadable(f"{path}: larger than {max_bytes} bytes")
    return b"".join(chunks)
