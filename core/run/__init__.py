"""A run: the loop that drives one, holding and controlling it across processes, subagents, and
the run API for loops that are not Tether's (:mod:`tether.run.tracked`). The words a run is
made of (its state, events, Stop) are in :mod:`tether.vocab`."""
