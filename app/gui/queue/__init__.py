"""The queue: its table, adding files (drop zone, watch folder), a job's time range, the worker's thread, and the
trash."""
