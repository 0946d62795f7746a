"""Light or dark: the system's choice by default, or the user's (View › Theme).

Qt follows the colour scheme of GNOME, KDE, Windows and macOS by itself; a plain X11 session (and Xvfb) tells
it nothing, and there asking Qt for a scheme changes nothing either. So a chosen theme is applied as Qt's
Fusion style with a palette of Scriba's own, which looks the same everywhere. Every colour Scriba draws itself
is read from the palette (queue states, speakers, the timeline), so a theme change reaches all of it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

THEMES = ("system", "light", "dark")
_original: tuple[str, QPalette] | None = None  # the platform's style and palette, for "system"

_DARK = {
    QPalette.ColorRole.Window: "#2b2b2b",
    QPalette.ColorRole.WindowText: "#dddddd",
    QPalette.ColorRole.Base: "#1e1e1e",
    QPalette.ColorRole.AlternateBase: "#262626",
    QPalette.ColorRole.Text: "#dddddd",
    QPalette.ColorRole.Button: "#353535",
    QPalette.ColorRole.ButtonText: "#dddddd",
    QPalette.ColorRole.BrightText: "#ff6b6b",
    QPalette.ColorRole.Highlight: "#2a82da",
    QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.ToolTipBase: "#353535",
    QPalette.ColorRole.ToolTipText: "#dddddd",
    QPalette.ColorRole.PlaceholderText: "#8a8a8a",
    QPalette.ColorRole.Link: "#6cb6ff",
    QPalette.ColorRole.Light: "#454545",
    QPalette.ColorRole.Midlight: "#3a3a3a",
    QPalette.ColorRole.Mid: "#2f2f2f",
    QPalette.ColorRole.Dark: "#1a1a1a",
    QPalette.ColorRole.Shadow: "#000000",
}


def dark_palette() -> QPalette:
    palette = QPalette()
    for role, colour in _DARK.items():
        palette.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7a7a7a"))
    return palette


def apply_theme(theme: str) -> None:
    """``system``: the platform's own style and palette; ``light``/``dark``: Fusion with a light or dark palette."""
    global _original
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    if _original is None:
        _original = (app.style().name(), QPalette(app.palette()))
    if theme == "system":
        QGuiApplication.styleHints().setColorScheme(Qt.ColorScheme.Unknown)
        app.setStyle(_original[0])
        app.setPalette(_original[1])
        return
    dark = theme == "dark"
    QGuiApplication.styleHints().setColorScheme(Qt.ColorScheme.Dark if dark else Qt.ColorScheme.Light)
    fusion = QStyleFactory.create("Fusion")
    app.setStyle(fusion)
    app.setPalette(dark_palette() if dark else fusion.standardPalette())


def mix_colours(first: QColor, second: QColor, weight: float) -> QColor:
    """``weight`` of ``first`` and the rest of ``second``, channel by channel (a colour between text and base
    that reads on any palette)."""
    return QColor.fromRgbF(
        first.redF() * weight + second.redF() * (1 - weight),
        first.greenF() * weight + second.greenF() * (1 - weight),
        first.blueF() * weight + second.blueF() * (1 - weight),
    )


def is_dark(palette: QPalette | None = None) -> bool:
    """Whether ``palette`` (default: the application's) is a dark one: a dark base under light text."""
    return (palette or QGuiApplication.palette()).color(QPalette.ColorRole.Base).lightness() < 128
