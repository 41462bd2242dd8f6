"""power (see the issue that builds it)."""
