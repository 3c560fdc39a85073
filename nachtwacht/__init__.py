"""The shells' common ground: the `nachtwacht` command and the one clock each program reads."""
