"""Renderers: pure functions from a plan (and spec) to text and files; no printing."""
