"""Qt-free cloud offload: price table, estimator, providers, SSH transport, remote worker, teardown ledger."""
