"""``relay health`` and ``relay ready``, as Edge's: exit 0 when the instance at ``--edge-url``
answers 200 on ``/internal-backstage/health`` (ready: 200 with ``{"status": "READY"}``),
else 1 with one line saying why. For container probes of a relay, or of an Edge."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import unquote

from relay.cli.edge.command_line import Check

TIMEOUT = 5.0


def run(check: Check) -> str | None:
    """None when the instance is healthy (ready), else why not."""
    path = "ready" if check.ready else "health"
    request, url = _request(f"{check.url}/internal-backstage/{path}")
    context = ssl.create_default_context(cafile=check.ca_file) if check.ca_file else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"{url} answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} did not answer: {getattr(exc, 'reason', exc)}"
    if check.ready:
        try:
            status = json.loads(body).get("status")
        except (ValueError, AttributeError):
            status = None
        if status != "READY":
            return f"{url} answered status {status!r}, not 'READY'"
    return None


def _request(url: str) -> tuple[urllib.request.Request, str]:
    """The request, and the URL as messages show it: ``user:password@`` in the URL is sent
    as Basic authentication (as Edge's client does), and shown as ``user:****@``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None and parts.username is None:
        return urllib.request.Request(url), url
    host = parts.netloc.rpartition("@")[2]
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    credentials = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    basic = base64.b64encode(credentials.encode()).decode()
    shown = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:****@{host}"))
    return urllib.request.Request(bare, headers={"Authorization": f"Basic {basic}"}), shown
