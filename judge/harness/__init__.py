"""Programs that run inside the judge's tool jail (judge/tooljail.py), each a single file run as `python3 -c`: the
jail's Debian python3 (3.11) with the standard library and the tool only."""
