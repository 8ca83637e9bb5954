"""The trace page in Debian's headless Chromium: a 1,000-call trace renders, filters and opens a call
with no request leaving the page (the failing test's trace is tested in test_pytest_plugin.py)."""

from __future__ import annotations

import time
from pathlib import Path

from trace_browser import trace_page

from dsh_sidecar.bridge.api.trace.document import Call, Mismatch, ModelStep, PointerValues, Run, TraceDocument
from dsh_sidecar.bridge.api.trace.redact import Redactor
from dsh_sidecar.bridge.api.trace.render import write_trace

CALLS = 1000


def _large(path: Path) -> Path:
    steps = [ModelStep(session="s", turn=1, step=i, source="cassette", text=f"step {i}", at_ms=i * 10,
                       duration_ms=2) for i in range(CALLS // 10)]
    calls = [Call(id=f"call-{n:04d}", tool="echo" if n % 7 else "grep", session="s", turn=1, step=n // 10,
                  args={"text": f"call {n:04d}"}, output=f"echoed {n:04d}", source="served", ordinal=n,
                  at_ms=n, duration_ms=1) for n in range(CALLS)]
    mismatch = Mismatch(kind="tool", code="CASSETTE_MISMATCH", message="echo at root/0, ordinal 3: changed /text",
                        where="echo at root/0, ordinal 3", recorded={"text": "a </script> b"}, live={"text": "c"},
                        pointers=[PointerValues(pointer="/text", change="changed", recorded="a </script> b",
                                                live="c")])
    run = Run(label="large", calls=calls, steps=steps, mismatches=[mismatch])
    return write_trace(TraceDocument(title="a 1,000-call trace", runs=[run]), Redactor(), path)


def test_a_1000_call_trace_renders_filters_and_opens_a_call_offline(tmp_path: Path) -> None:
    page_path = _large(tmp_path / "large.html")
    requests: list[str] = []
    start = time.perf_counter()
    with trace_page(page_path, requests) as page:
        rendered = time.perf_counter() - start
        rows = page.locator("[data-test=call-row]")
        assert rows.count() == CALLS
        # A value holding "</script>" stays data: the page still rendered, and shows it whole.
        assert page.locator("[data-test=recorded-value]").inner_text() == "a </script> b"
        start = time.perf_counter()
        page.fill("[data-test=search]", "call 0999")
        visible = page.locator("[data-test=call-row]:visible")
        assert visible.count() == 1
        visible.click()
        assert '"text": "call 0999"' in page.locator("[data-test=call-args]").inner_text()
        assert page.locator("[data-test=call-output]").inner_text() == "echoed 0999"
        opened = time.perf_counter() - start
        page.fill("[data-test=search]", "")
        assert page.locator("[data-test=call-row]:visible").count() == CALLS
    assert requests == []
    # Figures, not a timed assertion (bench_suite (k) measures a real 1,000-call run).
    print(f"1,000-call trace: rendered {rendered * 1000:.0f} ms (with the browser's start), "
          f"filtered and opened {opened * 1000:.0f} ms")
