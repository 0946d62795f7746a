"""Known speakers: the voiceprint library dialog and remembering a speaker from a transcript."""
