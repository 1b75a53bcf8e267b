"""The online SLM roles, each implementing an engine stage interface."""
