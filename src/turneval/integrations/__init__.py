"""Integrations with other frameworks, at ragas' import paths (``turneval.integrations.langgraph``)."""
