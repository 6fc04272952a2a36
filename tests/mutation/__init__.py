"""Mutation testing of the collection's core: ``make mutation`` (see docs in README.md, "Mutation testing")."""
