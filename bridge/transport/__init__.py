"""The wire: line framing, the JSON-RPC connection, the method table and its shapes, the stdio
guard, the serve loop and the files the sidecar hands the run API (its report).

Imports nothing else of ``bridge``: every other room builds on it.
"""
