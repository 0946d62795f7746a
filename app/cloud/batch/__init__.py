"""A batch of recordings over several GPU machines at once (issue 16)."""
