"""``relay health`` and ``relay ready``, as Edge's: exit 0 when the instance at ``--edge-url``
answers 200 on ``/internal-backstage/health`` (ready: 200 with ``{"status": "READY"}``),
else 1 with one line saying why. For container probes of a relay, or of an Edge."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

from relay.edge_cli.command_line import Check

TIMEOUT = 5.0


def run(check: Check) -> str | None:
    """None when the instance is healthy (ready), else why not."""
    path = "ready" if check.ready else "health"
    url = f"{check.url}/internal-backstage/{path}"
    context = ssl.create_default_context(cafile=check.ca_file) if check.ca_file else None
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT, context=context) as response:
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
