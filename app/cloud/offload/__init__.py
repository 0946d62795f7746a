"""One offload end to end: launch, run, watch, tear down, with a ledger of what was rented."""
