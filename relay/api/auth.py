"""Who a request acts as: the ``Authorization`` header resolved to a principal, or 401/403
with Unleash's messages."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from relay.api.errors import AuthenticationRequired, NoAccessError
from relay.api.state import KEY_RESOLVER
from relay.core.keys import Principal, strip_scheme
from relay.wire.common import KeyType

PRINCIPAL = web.RequestKey("principal", Principal)


async def authenticate(request: web.Request, required: KeyType) -> Principal:
    key = strip_scheme(request.headers.get("Authorization", ""))
    if not key:
        raise AuthenticationRequired(
            "This endpoint requires an API token. Please add an authorization header"
            " to your request with a valid token"
        )
    principal = (await identify(request, [key]))[key]
    if principal is None:
        raise AuthenticationRequired("The provided API token is invalid or has expired")
    if principal.type is not required:
        match required:
            case KeyType.CLIENT:
                message = "invalid token: expected a different token type for this endpoint"
            case KeyType.ADMIN:
                message = "You need an admin API token to perform this action"
        raise NoAccessError(message)
    return principal


async def identify(request: web.Request, keys: Sequence[str]) -> dict[str, Principal | None]:
    """Each key's principal (None: invalid); keys not known valid are checked together."""
    resolver = request.app[KEY_RESOLVER]
    found = {key: resolver.known(key) for key in keys}
    unknown = [key for key, principal in found.items() if principal is None and key]
    if not unknown:
        return found
    return found | await resolver.resolve_many(unknown)
