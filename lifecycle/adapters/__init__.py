"""Adapters turn each gateway's payloads into :class:`NormalizedEvent` objects."""

from .base import EventInvalid, NormalizedEvent

__all__ = ["EventInvalid", "NormalizedEvent"]
