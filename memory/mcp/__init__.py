"""SessionHub's MCP endpoint: the team's memory as tools an agent calls mid-session."""
