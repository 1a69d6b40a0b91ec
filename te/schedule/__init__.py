"""Schedule layer: how an operator is computed (stages, primitives, replayable steps)."""
