"""Command line: epochlog broker | up."""
