"""The user's settings, declared once with their types and defaults."""
