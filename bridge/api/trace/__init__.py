"""The trace of a test (docs/trace.md): a versioned JSON document and the HTML page that shows it."""
