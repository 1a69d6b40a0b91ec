"""Lower layer: schedule -> loop IR -> passes -> code generation."""
