"""Live dictation: the streaming transcriber behind `scriba dictate` and the window's panel, and saving it."""
