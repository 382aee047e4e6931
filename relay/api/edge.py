"""``POST /edge/validate``: which of the given keys are valid (as Unleash), so relays can
accept SDK keys they were not configured with. Unauthenticated, as in Unleash; keys are
unguessable, and the answer carries nothing a caller did not already hold."""

from __future__ import annotations

from aiohttp import web

from relay import models
from relay.api.routing import Route, read_json
from relay.auth import strip_scheme
from relay.state import KEY_RESOLVER


async def validate(request: web.Request) -> web.Response:
    body = await read_json(request, models.ValidateTokens)
    resolver = request.app[KEY_RESOLVER]
    valid = []
    for token in dict.fromkeys(strip_scheme(t) for t in body.tokens):
        principal = await resolver.resolve(token)
        if principal is not None:
            valid.append(
                models.ValidatedToken(
                    token=token,
                    type=principal.type,
                    projects=list(principal.projects),
                    environment=principal.environment,
                )
            )
    out = models.ValidatedTokens(tokens=valid)
    return web.Response(body=out.model_dump_json(), content_type="application/json")


ROUTES = [
    Route(
        "POST",
        "/edge/validate",
        validate,
        "Validate API keys",
        "edge",
        body=models.ValidateTokens,
        responses={200: models.ValidatedTokens},
        errors=(400, 413, 415),
    ),
]
