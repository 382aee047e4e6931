"""Who a request acts as: the ``Authorization`` header resolved to a principal, or 401/403
with Unleash's messages, or 429 for an address that presented too many invalid keys
(``relay.api.throttle``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

from aiohttp import web

from relay.api.client_address import caller_address
from relay.api.errors import AuthenticationRequired, NoAccessError, TooManyRequests
from relay.api.state import AUTH_FAILURES, KEY_RESOLVER
from relay.api.throttle import FAILURES, REFUSAL_DELAY, client_address
from relay.core.ingest_batch import Origin, owner_of
from relay.core.keys import (
    MIN_SECRET,
    Principal,
    hash_key,
    redact,
    short_secret,
    strip_scheme,
)
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

PRINCIPAL = web.RequestKey("principal", Principal)


ADMIN_KEYS = frozenset({KeyType.ADMIN})
CLIENT_KEYS = frozenset({KeyType.CLIENT})
FRONTEND_KEYS = frozenset({KeyType.FRONTEND})
SDK_KEYS = frozenset({KeyType.CLIENT, KeyType.FRONTEND})

KeySource = Callable[[web.Request], str]
"""Where a route takes its key from: ``authorization`` but for OFREP's paths."""


def authorization(request: web.Request) -> str:
    """The key in ``Authorization``, bare or after ``Bearer ``."""
    return strip_scheme(request.headers.get("Authorization", ""))


def origin_of(key: str, principal: Principal) -> Origin:
    """Whose a request's counts are: its key's, a public one's when a frontend key
    (``relay.core.ingest_batch.Origin``)."""
    return Origin(owner_of(hash_key(key)), principal.type is KeyType.FRONTEND)


async def authenticate(
    request: web.Request, accepted: frozenset[KeyType], presented: KeySource = authorization
) -> Principal:
    """The principal of the request's key, if its type is one the route accepts. As in
    Unleash, a client key reaches only ``/api/client``, a frontend key only the frontend
    paths (it is public: shipped in browser code), and an admin key only the admin API;
    both SDK keys reach OFREP's."""
    key = presented(request)
    if not key:
        raise AuthenticationRequired(
            "This endpoint requires an API token. Please add an authorization header"
            " to your request with a valid token"
        )
    principal = (await identify(request, [key]))[key]
    if principal is None:
        why = request.app[KEY_RESOLVER].refusal(key)
        refused = "The provided API token is invalid or has expired"
        raise AuthenticationRequired(f"{refused}: {why}" if why else refused)
    if principal.type not in accepted:
        if KeyType.ADMIN in accepted:
            raise NoAccessError("You need an admin API token to perform this action")
        raise NoAccessError("invalid token: expected a different token type for this endpoint")
    return principal


async def identify(request: web.Request, keys: Sequence[str]) -> dict[str, Principal | None]:
    """Each key's principal (None: invalid). Keys not known valid are checked together,
    within the caller's address's budget of failures (429 once it is spent)."""
    resolver = request.app[KEY_RESOLVER]
    await resolver.current()
    found = {key: resolver.known(key) for key in keys}
    unknown = [key for key, principal in found.items() if principal is None and key]
    if not unknown:
        return found
    budget = request.app[AUTH_FAILURES]
    address = client_address(caller_address(request))
    try:
        charged = budget.spend(address, unknown)
    except TooManyRequests:
        # answered late: a guesser's connections then make a request a second each, and
        # leave the event loop to everyone else (a sleeping request costs next to nothing)
        await asyncio.sleep(REFUSAL_DELAY)
        raise
    invalid = 0  # nothing learnt about them, should the check fail
    try:
        resolved = await resolver.resolve_many(unknown)
        invalid = sum(1 for key in unknown if resolved[key] is None)
    finally:
        budget.settle(address, unknown, charged, invalid)
    FAILURES.inc(invalid)
    return found | resolved


def warn_short_secrets(keys: Iterable[str], setting: str) -> None:
    """Keys pinned in the configuration are chosen by people; a short secret can be guessed
    by anyone who reaches the port, the failure limit only slows that down."""
    for key in keys:
        if short_secret(key):
            log.warning(
                f"a key in {setting} has a short secret: use {MIN_SECRET} or more random"
                " characters (relay keys create makes one)",
                extra={"key": redact(key)},
            )
