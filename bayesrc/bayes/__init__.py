"""bayes (see the issue that builds it)."""
