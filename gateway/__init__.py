"""The HTTP gateway: the only door into Tribunal."""
