"""report (see the issue that builds it)."""
