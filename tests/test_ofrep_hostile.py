"""What OFREP costs, and what a caller with any key (a frontend key is public) cannot get
from it: memory beyond the Frontend API's bounds, a count in another environment, another
scope's flags, a 5xx."""

from __future__ import annotations

import gc
import json
from datetime import UTC, datetime

from relay.core import ofrep
from relay.core.catalog import Rendered
from relay.core.frontend import Frontends


def _rendered(revision: int, flags: int = 20) -> Rendered:
    features = [
        {"name": f"f{n}", "enabled": True, "strategies": [{"name": "default"}]}
        for n in range(flags)
    ]
    body = json.dumps({"version": 2, "features": features, "segments": []}).encode()
    return Rendered(body, f'"r{revision}"', revision)


def test_answers_rendered_live_no_longer_than_the_compiled_scopes_they_came_from() -> None:
    """OFREP renders its answers from the Frontend API's compiled scopes (bounded in bytes):
    when those let a scope go (a change, too many scopes), its OFREP answers go with it,
    whatever their count."""
    frontends = Frontends(most_compiled=2)
    answers = ofrep.Ofreps()
    context = ofrep.context(ofrep.OfrepContext(targetingKey="u"), None, datetime.now(UTC))
    for revision in range(50):
        rendered = _rendered(revision)
        scoped = frontends.scoped(rendered)
        answers.of(scoped).bulk(scoped, context, True)
    gc.collect()
    assert len(answers) <= 2
