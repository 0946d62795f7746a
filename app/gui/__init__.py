"""The PySide6 window: shows and forwards; every decision about audio is made in :mod:`app.core`."""
