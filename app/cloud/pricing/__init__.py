"""The price table and the time/cost estimator (nothing is rented here)."""
