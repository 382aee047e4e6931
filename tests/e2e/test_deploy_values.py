"""Bad values fail before anything renders (values.schema.json) or while rendering, and the
schema's ``config`` takes exactly the settings the chart does not set, with the model's bounds.
"""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python as helm
import pytest
from deploy import CHART, CLIENT

from relay.cli.settings_docs import CHART_SETS
from relay.settings import Settings

pytestmark = pytest.mark.deploy

BAD_VALUES = [
    ({"mode": "edge"}, "/mode"),
    ({"config": {"flush_intervall": 5}}, "flush_intervall"),
    ({"config": {"flush_interval": 0}}, "/config/flush_interval"),
    ({"config": {"log_format": "xml"}}, "/config/log_format"),
    ({"config": {"buffer_max_bytes": 1.5}}, "/config/buffer_max_bytes"),
    ({"config": {"database_url": "postgres://db/relay"}}, "/config/database_url"),
    ({"config": {"port": 1}}, "port"),
    ({"mode": "relay", "tokens": {"upstream": [CLIENT]}}, "/upstream/url"),
    ({"mode": "relay", "upstream": {"url": "http://central:4242"}}, "/tokens/upstream"),
    (
        {"mode": "relay", "upstream": {"url": "central:4242"}, "tokens": {"upstream": [CLIENT]}},
        "/upstream/url",
    ),
    ({"tokens": {"initAdmin": ["default:development.not-an-admin-key"]}}, "/tokens/initAdmin/0"),
    ({"tokens": {"initClient": ["no-secret"]}}, "/tokens/initClient/0"),
    ({"replicaCount": 2}, "database_url"),
    ({"database": {"url": "mysql://db/relay"}}, "/database/url"),
    ({"database": {"password": "x"}}, "password"),
    ({"resources": {"limits": None}}, "missing property 'limits'"),
    ({"resources": {"requests": None}}, "missing property 'requests'"),
    ({"resources": {"limits": {"memory": None}}}, "missing property 'memory'"),
    ({"securityContext": {"runAsUser": 0, "runAsGroup": 0}}, "/securityContext/runAsUser"),
    ({"image": {"repository": ""}}, "/image/repository"),
    ({"port": 70000}, "/port"),
    ({"persistence": {"enabled": "yes"}}, "/persistence/enabled"),
    ({"podMonitor": {"enabled": True}}, "/podMonitor/selector"),
    ({"extraEnv": [{"name": "RELAY_DATA_DIR", "value": "/tmp"}]}, "/extraEnv/0/name"),
]


@pytest.mark.parametrize(("values", "where"), BAD_VALUES, ids=[w for _, w in BAD_VALUES])
def test_bad_values_fail_the_schema(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError, match=re.escape(where)):
            chart.validate_schema(values)
        with pytest.raises(helm.HelmValuesError):  # as `helm install` / `helm template` do
            chart.render(values, name="flags")


BAD_COMBINATIONS = [
    ({"terminationGracePeriodSeconds": 25}, "must be longer than"),  # 5 + 10 + 10
    ({"config": {"final_flush_timeout": 60}, "terminationGracePeriodSeconds": 30}, "longer"),
    (
        {
            "mode": "relay",
            "upstream": {"url": "http://central:4242"},
            "tokens": {"upstream": [CLIENT]},
            "replicaCount": 2,
        },
        "cannot be shared by 2 replicas",
    ),
    (
        {"replicaCount": 2, "config": {"database_url": "sqlite:////data/relay.db"}},
        "cannot be shared by 2 replicas",
    ),
]


@pytest.mark.parametrize(("values", "message"), BAD_COMBINATIONS)
def test_bad_combinations_fail_to_render(values: dict[str, Any], message: str) -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        with pytest.raises(helm.HelmRenderError, match=message):
            chart.render(values, name="flags")


def test_schema_config_matches_the_settings_model() -> None:
    """`config` takes exactly the settings the chart does not set, with the model's bounds."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    model = Settings.model_json_schema()
    assert set(config["properties"]) == set(model["properties"]) - CHART_SETS
    for name, prop in config["properties"].items():
        expected = model["properties"][name]
        if "$ref" in expected:
            expected = model["$defs"][expected["$ref"].split("/")[-1]]
        options = [o for o in expected.get("anyOf", [expected]) if o.get("type") != "null"]
        [want] = options
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        wanted = want["type"] if isinstance(want["type"], list) else [want["type"]]
        assert set(wanted) <= set(types), name  # workers: a number or "auto"
        assert ("null" in types) == ("anyOf" in model["properties"][name]), name
        for bound in ("minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength"):
            assert prop.get(bound) == want.get(bound), (name, bound)
        if "enum" in want:
            assert set(prop["enum"]) == set(want["enum"]), name
        assert prop["description"].endswith(model["properties"][name]["description"]), name
