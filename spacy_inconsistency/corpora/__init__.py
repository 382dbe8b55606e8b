"""Readers for each benchmark: files in ../shared/data -> records, Docs or DocBins."""
