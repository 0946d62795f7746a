"""The selected job's transcript: the editable document, its view with playback and search, the speaker strip, and
the exported files written again after an edit."""
