"""Serializer fields shared by the API's request bodies."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A text field that takes only JSON strings.

    DRF's ``CharField`` turns a number into its text (``7`` becomes ``"7"``); a gateway
    sending a number where text belongs has a bug worth a 400, not a silent coercion.
    """

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)
