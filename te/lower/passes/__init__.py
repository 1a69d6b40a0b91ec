"""Lowering passes: each module holds one pure function IR -> IR."""
