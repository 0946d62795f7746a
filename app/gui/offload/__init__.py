"""Offloading queued jobs to a rented GPU: the estimate and run dialog, the providers' API keys, and the start-up
sweep of machines an earlier run left behind."""
