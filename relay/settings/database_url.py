"""What a database URL must be before any store is opened with it.

Apart from the settings module so that it stays small; standard library only, like it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def check_database_url(url: str) -> None:
    """Raise ValueError for a URL no store can open. A message never repeats the URL past
    its scheme: the rest may hold a password, and one with an unencoded ``/`` or ``#``
    spills into the port, which urlsplit's own error quotes."""
    if not url.startswith(("sqlite:///", *POSTGRES_SCHEMES)):
        scheme = url.partition("://")[0] if "://" in url else ""
        named = repr(scheme) if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,20}", scheme) else "it"
        raise ValueError(f"database_url: unsupported scheme in {named}")
    if url.startswith(POSTGRES_SCHEMES):
        try:
            urlsplit(url).port  # noqa: B018 (reading the port is what fails)
        except ValueError:
            raise ValueError(
                "database_url: cannot be read as postgresql://USER:PASS@HOST:PORT/DB"
                " (percent-encode / # ? @ : in the user and password)"
            ) from None
