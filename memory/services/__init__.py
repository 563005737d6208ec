"""The memory app's writes: a continuity request (``continuity``), pins (``pins``) and
the distilling of a session's events (``distil``). Views, tasks, the admin and the MCP
tools call these."""
