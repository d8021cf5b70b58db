"""The HTTP API under /api/: the read and write endpoints, the error body, their URL modules."""
