"""Developer tools run from a checkout (`make accuracy`); not part of the railplan package."""
