"""Corpus ingestion: streaming readers per format, text utilities, and the COPY writer used by the import service."""
