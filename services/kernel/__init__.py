"""The shared kernel: settings, database, models, queue facade, telemetry, embedded Redis."""
