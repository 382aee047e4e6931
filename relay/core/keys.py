"""API keys: parsing Unleash-format keys, hashing, and who a request acts as.

Keys are random 256-bit secrets, so a single SHA-256 is a sufficient one-way hash (no salt
or slow KDF is needed against a secret nobody can guess), and it lets a key be found by an
index lookup of its hash: the presented key is never compared with stored keys byte by byte,
which is what makes lookups constant-time with respect to the secret.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from relay.wire.common import KeyType

_KEY = re.compile(
    r"^(?P<project>\*|\[\]|[A-Za-z0-9_.~-]+):(?P<env>\*|[A-Za-z0-9_.~-]+)\.(?P<secret>\S{8,})$"
)


# Below this, a secret chosen by a person (a pinned key) may be guessed; generated keys have
# 64 hex characters (256 bits), 32 are 128 bits.
MIN_SECRET = 32


class InvalidKey(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Principal:
    """What a presented key may do. ``display`` is safe to log (no secret)."""

    type: KeyType
    environment: str
    projects: tuple[str, ...]
    display: str
    token_name: str | None = None


@dataclass(frozen=True, slots=True)
class KeySpec:
    """A key about to be stored: its full secret string and its grants."""

    secret: str
    principal: Principal


class KeyResolver(Protocol):
    """Which keys are valid. Callers check ``known`` first, and ask about the other keys of a
    request together with ``resolve_many`` (one lookup, or one upstream call, for all)."""

    async def current(self) -> None:
        """Returns once what any worker of the service has decided about keys and shown a
        caller is known here (``relay.api.shared``): ``known`` then answers as it would."""
        ...

    def known(self, key: str) -> Principal | None:
        """The principal of a key known valid without any I/O (configured, or cached)."""
        ...

    async def resolve_many(self, keys: Sequence[str]) -> dict[str, Principal | None]:
        """Each key's principal, None for an invalid key; raises ``Unavailable`` when it
        cannot be said now."""
        ...

    def refusal(self, key: str) -> str | None:
        """Why a key ``resolve_many`` refused is refused, when there is more to say than
        that it is not valid (a relay's: valid upstream, outside the scopes it serves)."""
        ...


def hash_key(key: str) -> str:
    # surrogateescape: a header with bytes that are not UTF-8 is an unknown key, not a 500
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def strip_scheme(header: str) -> str:
    """The ``Authorization`` value as a key: Unleash accepts it bare or after ``Bearer ``."""
    value = header.strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    return value


def redact(key: str) -> str:
    """``project:env.****``: enough to tell keys apart in a log, nothing to use."""
    head, dot, _ = key.partition(".")
    return f"{head}.****" if dot and ":" in head else "****"


def well_formed(key: str) -> bool:
    """Whether a key has Unleash's form (``project:environment.secret``, ASCII): no other
    string can be a valid key, so no store or upstream needs to be asked about it."""
    return key.isascii() and _KEY.match(key) is not None


def short_secret(key: str) -> bool:
    """A configured key whose secret is shorter than ``MIN_SECRET`` characters."""
    found = _KEY.match(key)
    return found is not None and len(found["secret"]) < MIN_SECRET


def parse_key(key: str, type: KeyType) -> KeySpec:
    """Check a configured key (``project:environment.secret``) and what it grants."""
    found = _KEY.match(key)
    if found is None:
        raise InvalidKey(f"{redact(key)}: expected project:environment.secret")
    project, environment = found["project"], found["env"]
    match type:
        case KeyType.ADMIN if (project, environment) != ("*", "*"):
            raise InvalidKey(f"{redact(key)}: an admin key has the form *:*.secret")
        case KeyType.CLIENT | KeyType.FRONTEND if environment == "*":
            raise InvalidKey(f"{redact(key)}: a {type} key needs one environment, not *")
        case KeyType.ADMIN | KeyType.CLIENT | KeyType.FRONTEND:
            pass
    projects = ("*",) if project in ("*", "[]") else (project,)
    return KeySpec(key, Principal(type, environment, projects, redact(key)))


WILDCARD_ENVIRONMENT = "default"
"""The environment an offline wildcard key's counts are kept under: it names none, and
``default`` is what the SDKs call an environment nobody named."""


def offline_principal(key: str, type: KeyType) -> Principal:
    """A key of offline mode, as Unleash Edge's offline mode takes it
    (``EdgeToken::offline_token``): a string with ``project:environment.`` in front is
    scoped to that project and environment, whatever follows; any other string is a
    wildcard that sees every flag of the file. Edge's parse is looser than
    ``parse_key``'s (no length or characters asked of the secret), so a CI's
    ``default:development.ci`` is scoped, never widened to everything."""
    head, colon, rest = key.strip().partition(":")
    environment, dot, _ = rest.partition(":")[0].partition(".")
    if not (colon and dot):
        return Principal(type, WILDCARD_ENVIRONMENT, ("*",), "offline wildcard ****")
    if head == "[]" or not head or not environment:
        raise InvalidKey(
            f"{redact(key)}: offline keys are a project and an environment"
            " (project:environment.secret, the project may be *), or any string without"
            " that form (every flag of the file); a multi-project key ([]:) names no project"
        )
    if type is not KeyType.ADMIN and environment == "*":
        raise InvalidKey(f"{redact(key)}: a {type} key needs one environment, not *")
    projects = ("*",) if head == "*" else (head,)
    return Principal(type, environment, projects, redact(key))


def new_key(type: KeyType, environment: str, projects: tuple[str, ...]) -> KeySpec:
    """A fresh random key in Unleash's format."""
    match type:
        case KeyType.ADMIN:
            prefix, environment, projects = "*:*", "*", ("*",)
        case KeyType.CLIENT | KeyType.FRONTEND:
            project = projects[0] if len(projects) == 1 else "[]"
            prefix = f"{project}:{environment}"
    key = f"{prefix}.{secrets.token_hex(32)}"
    return KeySpec(key, Principal(type, environment, projects, redact(key)))
