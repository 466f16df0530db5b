"""Namespace labs: describe (pure topology) -> plan (pure list of ops) -> apply -> clean."""
