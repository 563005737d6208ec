"""Text work both apps share and no Django in it: secret redaction and reasoning tails."""
