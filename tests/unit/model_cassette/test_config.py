"""The ``modelCassette`` row section."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.model_cassette import parse_config


def test_defaults_and_resolution_against_the_cwd() -> None:
    config = parse_config({"mode": "record", "file": "m.ndjson"}, cwd="/work")

    assert (config.file, config.requestView, config.timing, config.providers) == (
        "/work/m.ndjson", "metadata", "instant", None,
    )
    assert config.captures("deepseek-official") and not config.captures("mock")


@pytest.mark.parametrize(("raw", "message"), [
    ({"mode": "play", "file": "m"}, "modelCassette.mode: must be record or replay"),
    ({"mode": "record"}, "modelCassette.file: must be a non-empty path"),
    ({"mode": "record", "file": "m", "timing": "slow"}, "modelCassette.timing: must be instant or recorded"),
    ({"mode": "record", "file": "m", "requestView": "all"}, "modelCassette.requestView: must be metadata or full"),
    ({"mode": "record", "file": "m", "providers": []}, "modelCassette.providers: must be a non-empty list"),
    ({"mode": "record", "file": "m", "key": 1}, "modelCassette.key: unknown key"),
    ("record", "modelCassette: must be an object"),
])
def test_bad_values_name_the_field(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, cwd="/work")

    assert str(caught.value).startswith(f"INVALID_CONFIG: {message}")
