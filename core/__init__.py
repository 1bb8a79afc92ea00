"""Tether core: the harness. Never imports Textual."""
