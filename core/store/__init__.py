"""Where runs live: the interface every store implements (protocol), the control channel that carries Stop and decisions, the index of summaries, and two implementations: files/ and postgres/."""
