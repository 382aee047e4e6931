"""``POST /edge/validate``: which of the given keys are valid (as Unleash), so relays can
accept SDK keys they were not configured with. Unauthenticated, as in Unleash; keys are
unguessable, and the answer carries nothing a caller did not already hold."""

from __future__ import annotations

from aiohttp import web

from relay.api.body import read_json
from relay.api.responses import model_response
from relay.api.routing import Route
from relay.api.state import KEY_RESOLVER
from relay.core.keys import strip_scheme
from relay.wire.validate import ValidatedKey, ValidatedKeys, ValidateKeys


async def validate(request: web.Request) -> web.Response:
    body = await read_json(request, ValidateKeys)
    resolver = request.app[KEY_RESOLVER]
    valid = []
    for key in dict.fromkeys(strip_scheme(t) for t in body.tokens):
        principal = await resolver.resolve(key)
        if principal is not None:
            valid.append(
                ValidatedKey(
                    token=key,
                    type=principal.type,
                    projects=list(principal.projects),
                    environment=principal.environment,
                )
            )
    return model_response(ValidatedKeys(tokens=valid))


ROUTES = [
    Route(
        "POST",
        "/edge/validate",
        validate,
        "Validate API keys",
        "edge",
        body=ValidateKeys,
        responses={200: ValidatedKeys},
        errors=(400, 413, 415),
    ),
]
