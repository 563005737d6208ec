"""Log records lose their secrets before a handler writes them.

Django's request logger names the path of every refused request ("Not Found:
/api/v1/sessions/..."), and the development server logs every request line: a key a
client put in a URL would be written as it came. ``RedactingFilter`` passes a record's
message through the redaction rules that stored data goes through (settings.LOGGING puts
it on those two loggers and on the console handler).
"""

from __future__ import annotations

import logging

from sessionhub.text.redaction import redact_text


class RedactingFilter(logging.Filter):
    """Replaces a record's message by its redacted text when it held a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
