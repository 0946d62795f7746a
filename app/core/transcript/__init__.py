"""The transcript document: its segments and speakers (document), the edits a person makes (edit), times as
people read them (times), the formats it is exported to (formats) and how it is saved to files (save). Below the
engine, which builds transcripts: nothing here imports the engine, the queue or the settings."""
