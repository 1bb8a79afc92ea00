"""Tether as an ACP agent (``tether acp``): the pieces behind :mod:`tether.acp.server`.

- :mod:`.updates`: a run's events, and a saved transcript, as ``session/update`` notifications;
  how a run's end reads as a stop reason and in words.
- :mod:`.approvals`: a run's approvals as the editor's permission requests, the first decision
  (the editor's or a Tether console's) winning, the loser told.
- :mod:`.session`: one ACP session, the Tether run behind it, and its prompt turns.
"""
