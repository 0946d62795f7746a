"""The persistent job queue (SQLite) and the worker that runs it, inference in a child process."""
