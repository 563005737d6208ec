"""Django's PostgreSQL backend with a cheaper per-request health check (``base``)."""
