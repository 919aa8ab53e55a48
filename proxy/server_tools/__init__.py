"""Tools toolshim runs itself (definitions, the calculator, HTTP tools, MCP servers, the
runner and the loop the flow calls between upstream turns). Must not: run a tool the
operator did not define, or let a client's call reach beyond the target it allows."""
