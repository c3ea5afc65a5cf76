"""Tribunal's shared kernel and the launcher: what every service imports, and the `tribunal` CLI."""
