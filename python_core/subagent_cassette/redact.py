"""Persistence redaction: credential shapes and configured patterns become ``[REDACTED]``.

Rule: redaction only touches string values of persisted views (fingerprints are taken before
it). Object keys and the structural fields ``type`` (content-block discriminators) and
``mediaType`` (image attachments) are never substituted; a pattern that would match one of them
is ``INVALID_CONFIG``, checked against the known vocabulary when the configuration is built and
again against every structural value met while recording.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from dsh_sidecar.python_core.errors import ConfigError

__all__ = ["BUILTIN_PATTERNS", "REDACTED", "Redactor", "build_redactor"]

REDACTED: Final = "[REDACTED]"

BUILTIN_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    ("bearer-token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{12,}=*"),
    ("aws-access-key-id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b"),
    ("aws-secret-access-key", r"(?i)\baws_?secret_?access_?key\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}"),
    ("sk-api-key", r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    (
        "credential-assignment",
        r"(?i)\b(?:api[_-]?key|secret|token|password|passwd)\s*[=:]\s*[\"']?[^\s\"',;]{8,}",
    ),
)

PROTECTED_FIELDS: Final = frozenset({"type", "mediaType"})

# The structural vocabulary a pattern must leave alone: DSH rc.8 block types and the image
# media types the attachment store accepts.
_STRUCTURAL_SAMPLES: Final = (
    "text",
    "reasoning",
    "image",
    "tool-call",
    "tool-result",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
)


class Redactor:
    """Applies compiled patterns in order; counts substitutions."""

    def __init__(self, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> None:
        """Keep ``(field, pattern)`` pairs; ``field`` names the pattern in errors."""
        self._patterns = tuple(patterns)

    def text(self, text: str) -> tuple[str, int]:
        """Return ``text`` with every match replaced and the number of substitutions."""
        total = 0
        for _, pattern in self._patterns:
            text, count = pattern.subn(REDACTED, text)
            total += count
        return text, total

    def _guard(self, value: str, field: str) -> None:
        """Refuse a pattern that would alter a structural field value."""
        for name, pattern in self._patterns:
            if pattern.search(value):
                raise ConfigError(name, f"pattern would alter structural field {field}")

    def value(self, value: Any) -> tuple[Any, int]:
        """Return a redacted copy of a JSON value and the substitution count.

        Iterative, so deeply nested blocks cost no recursion.

        Raises:
            ConfigError: a pattern matches a ``type`` or ``mediaType`` value (INVALID_CONFIG).
        """
        if not self._patterns:
            return value, 0
        total = 0
        root: list[Any] = [value]
        stack: list[tuple[Any, Any, str | None]] = [(root, 0, None)]
        while stack:
            container, key, field = stack.pop()
            item = container[key]
            if isinstance(item, str):
                if field in PROTECTED_FIELDS:
                    self._guard(item, field)
                    continue
                redacted, count = self.text(item)
                if count:
                    container[key] = redacted
                    total += count
            elif isinstance(item, dict):
                copy = dict(item)
                container[key] = copy
                stack.extend((copy, name, name) for name in copy)
            elif isinstance(item, list):
                items = list(item)
                container[key] = items
                stack.extend((items, index, None) for index in range(len(items)))
        return root[0], total


def build_redactor(redact_secrets: bool, patterns: Sequence[str]) -> Redactor:
    """Compile the built-in (when ``redact_secrets``) and configured patterns.

    Raises:
        ConfigError: a configured pattern does not compile, matches the empty string or
            ``[REDACTED]``, or would match a structural field value (INVALID_CONFIG).
    """
    compiled: list[tuple[str, re.Pattern[str]]] = []
    if redact_secrets:
        compiled.extend((f"builtin:{name}", re.compile(rx)) for name, rx in BUILTIN_PATTERNS)
    for index, source in enumerate(patterns):
        field = f"redactionPatterns[{index}]"
        try:
            pattern = re.compile(source)
        except re.error:
            raise ConfigError(field, "not a valid regular expression") from None
        if pattern.search("") is not None:
            raise ConfigError(field, "pattern matches the empty string")
        if pattern.search(REDACTED) is not None:
            raise ConfigError(field, f"pattern matches the replacement {REDACTED}")
        compiled.append((field, pattern))
    for field, pattern in compiled:
        for sample in _STRUCTURAL_SAMPLES:
            if pattern.search(sample):
                structural = "mediaType" if "/" in sample else "type"
                raise ConfigError(field, f"pattern would alter structural field {structural}")
    return Redactor(compiled)
