"""Offline consolidation of MTM into the cross-user LTM graph."""
