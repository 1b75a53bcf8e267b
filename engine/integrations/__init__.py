"""Adapters that let agent frameworks use a tiermem memory through their own interfaces."""
