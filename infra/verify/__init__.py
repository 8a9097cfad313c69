"""railplan verify: a discovered InfiniBand fabric against the plan (issue 22, in progress)."""
