"""tilescope's viewer. ``app.views`` are pure (Report -> tables) and import no Dash, so the CLI can use them."""
