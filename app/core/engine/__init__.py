"""The engine: decode, transcribe, diarize and merge into a transcript (app.core.transcript). Imports nothing of
the queue, dictation or settings (an import-linter contract), so a script, the worker and the remote machine use it
alike."""
