"""Ingestion's parts; ``lifecycle.services`` is the way in (events_ingest and friends)."""
