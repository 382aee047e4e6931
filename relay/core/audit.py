"""The event log's domain: who made an admin change (``Actor``), Unleash's names of the
changes, and the bound on what an event keeps of the thing before and after.

Pure: no SQL, no HTTP. ``relay.central.event_records`` stores events; the API layer says who acts.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypedDict

from relay.core.keys import Principal

MAX_DATA_BYTES = 32 * 1024
"""What an event keeps of the thing before or after the change, as JSON: a flag with a few
environments and strategies is 1 to 5 KB; one past this is kept as its name and size, so
an event (and the log, at ``event_log_kept`` events) stays bounded whatever a flag holds."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who an event says made the change (Unleash's ``createdBy``): an admin key's name, or
    its safe display (``*:*.abcd****``) when it has none; never a secret."""

    name: str

    @classmethod
    def of_key(cls, principal: Principal) -> Actor:
        return cls(principal.token_name or principal.display)

    @classmethod
    def command_line(cls) -> Actor:
        """``relay flags`` and ``relay keys``: the operating system's user."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no name for the uid (a container's random user)
            user = "unknown"
        return cls(f"{user} (command line)")


class EventType(StrEnum):
    """Unleash 8's event type names (``src/lib/events/index.ts``) of the changes made here."""

    FEATURE_CREATED = "feature-created"
    FEATURE_METADATA_UPDATED = "feature-metadata-updated"
    FEATURE_ARCHIVED = "feature-archived"
    FEATURE_REVIVED = "feature-revived"
    FEATURE_DELETED = "feature-deleted"
    FEATURE_ENVIRONMENT_ENABLED = "feature-environment-enabled"
    FEATURE_ENVIRONMENT_DISABLED = "feature-environment-disabled"
    FEATURE_STRATEGY_ADD = "feature-strategy-add"
    FEATURE_STRATEGY_UPDATE = "feature-strategy-update"
    FEATURE_STRATEGY_REMOVE = "feature-strategy-remove"
    STRATEGY_ORDER_CHANGED = "strategy-order-changed"
    FEATURE_DEPENDENCY_ADDED = "feature-dependency-added"
    FEATURE_DEPENDENCY_REMOVED = "feature-dependency-removed"
    FEATURE_ENVIRONMENT_VARIANTS_UPDATED = "feature-environment-variants-updated"
    FEATURE_TAGGED = "feature-tagged"
    FEATURE_UNTAGGED = "feature-untagged"
    TAG_TYPE_CREATED = "tag-type-created"
    TAG_TYPE_DELETED = "tag-type-deleted"
    FEATURES_EXPORTED = "features-exported"
    FEATURES_IMPORTED = "features-imported"
    SEGMENT_CREATED = "segment-created"
    SEGMENT_UPDATED = "segment-updated"
    SEGMENT_DELETED = "segment-deleted"
    PROJECT_CREATED = "project-created"
    PROJECT_UPDATED = "project-updated"
    PROJECT_DELETED = "project-deleted"
    PROJECT_ENVIRONMENT_ADDED = "project-environment-added"
    PROJECT_ENVIRONMENT_REMOVED = "project-environment-removed"
    DEFAULT_STRATEGY_UPDATED = "default-strategy-updated"
    ENVIRONMENT_CREATED = "environment-created"
    ENVIRONMENT_UPDATED = "environment-updated"
    ENVIRONMENT_DELETED = "environment-deleted"
    API_TOKEN_CREATED = "api-token-created"
    API_TOKEN_DELETED = "api-token-deleted"


class About(TypedDict, total=False):
    """What an event is about within its project (each absent: not about one), and the
    thing before and after the change as the admin API shows it (JSON-able)."""

    feature: str | None
    environment: str | None
    before: Any
    after: Any


class Subject(About, total=False):
    """``About``, and the project (absent: none, as a global segment's change)."""

    project: str | None


def bounded(data: Any) -> str | None:
    """``data`` (JSON-able) as the JSON an event keeps: itself up to ``MAX_DATA_BYTES``,
    else its name (when it has one), ``truncated`` and its size in bytes."""
    if data is None:
        return None
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode())
    if size <= MAX_DATA_BYTES:
        return text
    name = data.get("name") if isinstance(data, dict) else None
    return json.dumps({"name": name, "truncated": True, "bytes": size})
