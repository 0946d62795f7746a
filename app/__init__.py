"""Scriba: transcribe and diarize audio on your own machine."""

__version__ = "0.1.0"
