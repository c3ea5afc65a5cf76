"""Programs that run inside the jail next to the candidate (stdlib only, the jail's Python 3.11)."""
