"""A run: the loop that drives one, its state and events, Stop, the ledger of what was paid, and the words a decision is told in; and the run API for loops that are not Tether's."""
