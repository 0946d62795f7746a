"""Settings and speech models: the settings dialog, the model manager, the first-run page, speaker detection's
download, and the offers made when a job's model or language does not fit the recording."""
