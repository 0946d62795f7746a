"""A fleet: several GPU machines at once, working through one set of recordings from one queue (issue 16)."""
