"""The reports service: builds meta-evaluation reports (``POST /v1/reports``) from the database with the pure
report builders of :mod:`metrics.reports`, renders their plots and HTML page, and stores all three. Its worker
(:mod:`services.reports.worker`) is the only place reports meet the queue and the database."""
