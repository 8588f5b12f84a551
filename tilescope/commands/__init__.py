"""One module per ``tilescope`` verb."""
