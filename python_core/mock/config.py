"""The plugin row's ``mock`` section: the ``mock`` model route and its pacing.

Rule: keys ``enabled``, ``defaultGapMs`` and ``nestedTools``, all optional; anything else, or a
value of the wrong type or range, is a ``ConfigError`` naming ``mock.<key>``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from dsh_sidecar.python_core.config_fields import ConfigSection, convert_section

__all__ = ["MAX_GAP_MS", "MockConfig", "parse_config"]

MAX_GAP_MS = 3_600_000


class MockConfig(ConfigSection, frozen=True, kw_only=True, rename="camel"):
    """The ``mock`` section: the ``mock`` model route and its default gap between steps."""

    enabled: bool = True
    default_gap_ms: Annotated[int, msgspec.Meta(ge=0, le=MAX_GAP_MS)] = 100
    nested_tools: tuple[Annotated[str, msgspec.Meta(min_length=1)], ...] = ()
    """Extra tool names a replay refuses as nested (renamed delegation rows, own composites)."""


def parse_config(raw: object) -> MockConfig:
    """Validate the ``mock`` section.

    Raises:
        ConfigError: an unknown key or an invalid value, named ``mock.<key>``.
    """
    return convert_section(raw, MockConfig, "mock")
