"""switch (see the issue that builds it)."""
