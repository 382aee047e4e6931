"""The settings of the Unleash Proxy's paths at a relay (``relay proxy`` sets them from the
Proxy's variables: ``relay.cli.proxy``), after every other setting in the docs' order.
Apart from ``relay.settings.fields`` because they are a whole of their own (``proxy_*``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from relay.settings.fields import SettingsFields
from relay.settings.usage import BasePath, CommaList, HeaderName, Mode, Usage


class ProxySettingsFields(SettingsFields):
    """The fields of ``SettingsFields``, then the Unleash Proxy's (docs/proxy.md)."""

    proxy_client_keys: Annotated[
        CommaList,
        Usage(
            Mode.EDGE,
            note="Public by design: shipped in browser code. They see the flags of the first"
            " client_tokens key (relay proxy: UNLEASH_API_TOKEN's); docs/proxy.md",
        ),
    ] = Field(
        default_factory=list,
        description="Relay: the Unleash Proxy's client keys, any strings, taken at"
        " {proxy_base_path}/proxy; empty: no such paths",
    )
    proxy_server_keys: Annotated[CommaList, Usage(Mode.EDGE, secret=True)] = Field(
        default_factory=list,
        description="Relay: keys, any strings, that read {proxy_base_path}/proxy/client/features"
        " (the Proxy's EXP_SERVER_SIDE_SDK_CONFIG_TOKENS)",
    )
    proxy_base_path: Annotated[BasePath, Usage(Mode.EDGE)] = Field(
        "", description="Relay: the path in front of /proxy (the Proxy's PROXY_BASE_PATH)"
    )
    proxy_key_header: Annotated[HeaderName, Usage(Mode.EDGE)] = Field(
        "authorization",
        description="Relay: the header that carries a proxy client key, its value as it is",
    )
    proxy_environment: Annotated[str | None, Usage(Mode.EDGE, example="production")] = Field(
        None,
        min_length=1,
        max_length=255,
        description="Relay: the environment of every /proxy context, whatever the caller says",
    )
    proxy_project: Annotated[str | None, Usage(Mode.EDGE, example="web")] = Field(
        None,
        min_length=1,
        max_length=255,
        description="Relay: the one project whose flags /proxy serves (default: the key's)",
    )
    proxy_name_prefix: Annotated[str | None, Usage(Mode.EDGE, example="web.")] = Field(
        None,
        min_length=1,
        max_length=255,
        description="Relay: /proxy serves only flags whose name starts with this",
    )
    proxy_cors_methods: Annotated[str, Usage(Mode.EDGE)] = Field(
        "GET, POST", min_length=1, description="Relay: Access-Control-Allow-Methods of /proxy"
    )
    proxy_cors_allowed_headers: Annotated[str | None, Usage(Mode.EDGE, example="authorization")] = (
        Field(
            None,
            min_length=1,
            description="Relay: Access-Control-Allow-Headers of /proxy (default: those asked for)",
        )
    )
    proxy_cors_exposed_headers: Annotated[str, Usage(Mode.EDGE)] = Field(
        "ETag", description="Relay: Access-Control-Expose-Headers of /proxy (empty: none)"
    )
    proxy_cors_max_age: Annotated[int, Usage(Mode.EDGE)] = Field(
        172800, ge=0, description="Relay: seconds a browser keeps a /proxy preflight's answer"
    )
    proxy_cors_credentials: Annotated[bool, Usage(Mode.EDGE)] = Field(
        False, description="Relay: Access-Control-Allow-Credentials: true on /proxy"
    )
    proxy_cors_preflight_status: Annotated[int, Usage(Mode.EDGE)] = Field(
        204, ge=200, le=299, description="Relay: the status of a /proxy preflight's answer"
    )
