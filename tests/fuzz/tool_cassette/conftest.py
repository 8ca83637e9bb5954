"""The tool cassette fixtures of ``tests/unit/tool_cassette`` (one definition), for the fuzz tests here."""

from tests.unit.tool_cassette.conftest import kit, make_cassette, make_config

__all__ = ["kit", "make_cassette", "make_config"]
