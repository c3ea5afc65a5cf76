"""One module per resource: the only place that resource meets HTTP."""
