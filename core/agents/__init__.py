"""What an agent is made of: its definition and agent file, its tools (built-in, Python functions, MCP servers), subagents, and the workspace it may touch."""
