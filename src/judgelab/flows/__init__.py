"""Prefect flows: thin, one per stage plus the whole pipeline. No business logic here."""
