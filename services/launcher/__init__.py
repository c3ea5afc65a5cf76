"""The launcher, the top layer: the command line (cli), the process stack (stack), the demo, migrations and
the observability stack (Prometheus). Nothing below imports it."""
