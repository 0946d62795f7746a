"""Help › About: the version and every model's licence."""

from __future__ import annotations

from app import __version__


def about_text() -> str:
    """The About dialog's text: the version and each model's licence (CC-BY-4.0 asks for this attribution)."""
    from app.core.engine.diarize.pyannote_models import MODEL_LICENSES

    models = "".join(f"<li>{name} — {licence}</li>" for name, licence in MODEL_LICENSES)
    return (
        f"<p><b>Scriba {__version__}</b><br>Transcribe and diarize, locally. MIT licence.</p>"
        f"<p>Models:</p><ul>{models}</ul>"
    )
