"""MCP servers as tool catalogs.

An agent lists :class:`MCPServer` s; a run enters :func:`mcp_tools`, which starts them,
lists their tools and yields them as :class:`MCPTool` objects that the loop calls like any
other tool. Leaving the block stops every server, however it is left.

    async with mcp_tools([MCPServer("time", command=sys.executable, args=("-m", "mcp_server_time"),
                                    trust_annotations=True)]) as tools:
        ...  # tools: [MCPTool get_current_time, MCPTool convert_time]

How it is built (on facts measured with mcp 2.3 and the reference time server):

* **One supervisor task per server.** The SDK's client context must be entered and left in
  the same task ("exit cancel scope in a different task" otherwise). Each server gets a task
  of its own, started by :func:`mcp_tools`, that is the only one ever to enter or leave that
  server's client: the first start, every restart and the final stop. Tool calls, from
  whichever task the loop runs them in (``CancelSignal.guard`` runs each in a task of its own),
  only send requests on the live session and ask the supervisor for a (re)start. So a run
  driven from one task, several tasks or none in particular all keep the SDK's rule.
* **Cancellation reaches the SDK once, or never.** The supervisors are never cancelled with
  ``Task.cancel()`` (a second cancel breaks through the SDK's shielded shutdown and leaks the
  server): they are told to stop with an event, and a start-up is cut off with an anyio
  cancel scope, which respects the SDK's shields. A Stop during a call cancels the call's own
  task once, through ``ctx.signal.guard``; the SDK then sends ``notifications/cancelled`` and
  the session stays usable. Leaving :func:`mcp_tools` waits for the supervisors to finish
  (a cancellation arriving meanwhile is held and re-raised once they have).
* **Handshake.** ``mode="legacy"`` (the ``initialize`` handshake): the default ``"auto"`` first
  probes a newer handshake with a fixed 10 s timeout. Start-up (spawn, handshake and the tool
  listing) is bounded by ``MCPServer.startup_timeout_s``: a server that never answers fails
  with :class:`MCPStartError` instead of hanging.
* **Processes.** Every stdio server runs under ``python -m tether.agents.mcp_launcher`` (see that
  module), which closes the SDK's two process leaks: grandchildren of a server that exits
  cleanly, and a server that ignores EOF when the harness is SIGKILLed.
* **A dead server** (it crashed, or closed the connection) fails the call in flight with a
  :class:`~tether.agents.tool_errors.ToolError` that quotes the end of its stderr; the next call
  restarts it. Tools keep the names and schemas of the first listing.
* **Policy.** Tool annotations are hints the spec calls untrusted: they set read_only,
  needs_approval and idempotent only for a server with ``trust_annotations=True``. An
  untrusted server's tools all write and need approval, and the approval's reason says so.
* **Names.** A tool keeps the server's name for it unless that collides (``time.get_current_time``
  then). The model is offered each tool under :func:`~tether.agents.tools.base.offered_name`
  (``time__get_current_time``: hosted endpoints refuse dots and more), and the run loop maps
  its calls back; two tools that would be offered under one name are refused at start.

The rooms: :mod:`~tether.agents.mcp.server` (a server as an agent declares it),
:mod:`~tether.agents.mcp.tool` (one of its tools, its policy and its results in words),
:mod:`~tether.agents.mcp.link` (the supervisor task and live session of one server) and
:mod:`~tether.agents.mcp.catalog` (:func:`~tether.agents.mcp.catalog.mcp_tools`: every
server started, its tools named, all stopped on the way out).
"""
