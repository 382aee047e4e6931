"""``POST /edge/validate``: which of the given keys are valid (as Unleash), so relays can
accept SDK keys they were not configured with. Unauthenticated, as in Unleash; keys are
unguessable, the answer carries nothing a caller did not already hold, and the keys of one
request are checked together (one lookup, or one upstream call, for all of them), within
the caller's address's budget of invalid keys (``relay.api.throttle``)."""

from __future__ import annotations

from aiohttp import web

from relay.api.auth import identify
from relay.api.body import read_json
from relay.api.responses import model_response
from relay.api.routing import Route
from relay.core.keys import strip_scheme
from relay.wire.validate import ValidatedKey, ValidatedKeys, ValidateKeys


async def validate(request: web.Request) -> web.Response:
    body = await read_json(request, ValidateKeys)
    keys = list(dict.fromkeys(strip_scheme(t) for t in body.tokens))
    principals = await identify(request, keys)
    valid = [
        ValidatedKey(
            token=key,
            type=principal.type,
            projects=list(principal.projects),
            environment=principal.environment,
        )
        for key in keys
        if (principal := principals[key]) is not None
    ]
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
        errors=(400, 413, 415, 429, 503),
    ),
]
