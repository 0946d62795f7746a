"""Qt-free engine: decoding, transcription, diarization, merging and export.

Nothing in this package may import Qt (an import-linter contract in the test suite enforces it), and the
heavy libraries (torch, faster_whisper, pyannote.audio) are imported lazily inside the functions that use
them, so that importing ``app.core`` stays cheap for the GUI and the CLI.
"""
