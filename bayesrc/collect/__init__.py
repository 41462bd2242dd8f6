"""collect (see the issue that builds it)."""
