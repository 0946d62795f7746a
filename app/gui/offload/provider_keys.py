"""The cloud providers' API keys, set from the offload dialog ("API keys…") instead of a terminal: stored in the
system keyring as `scriba offload key set` stores them, never shown back, never written to a file."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.cloud.providers import PROVIDER_CLASSES, api_key, key_env_name
from app.core.secrets import keyring_problem, set_secret


class ProviderKeysDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Cloud API keys")
        self.fields: dict[str, QLineEdit] = {}
        self.status: dict[str, QLabel] = {}
        self.removed: set[str] = set()
        form = QFormLayout()
        for name, cls in PROVIDER_CLASSES.items():
            field = QLineEdit()
            field.setEchoMode(QLineEdit.EchoMode.Password)
            field.setPlaceholderText("paste a new key")
            status = QLabel()
            remove = QPushButton("Remove")
            remove.clicked.connect(lambda _=False, chosen=name: self._remove(chosen))
            row = QHBoxLayout()
            row.addWidget(field, 1)
            row.addWidget(status)
            row.addWidget(remove)
            form.addRow(cls.title, row)
            self.fields[name], self.status[name] = field, status
        self.error = QLabel("")
        self.error.setWordWrap(True)
        self.error.hide()
        note = QLabel(
            "Keys go to the system keyring, never to a file. "
            "On a machine without a keyring, set SCRIBA_VAST_API_KEY and the like in the environment instead."
        )
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self._show_status()

    def _show_status(self) -> None:
        for name, cls in PROVIDER_CLASSES.items():
            try:
                present = api_key(cls) is not None
            except Exception:  # no keyring backend: the field still takes a key, and saving says why it cannot
                present = False
            self.status[name].setText(
                "will be removed" if name in self.removed else ("a key is set" if present else "no key")
            )

    def _remove(self, name: str) -> None:
        self.removed.add(name)
        self.fields[name].clear()
        self._show_status()

    def accept(self) -> None:
        """Store what was typed, remove what was asked; stay open with the reason when the keyring refuses."""
        try:
            for name, cls in PROVIDER_CLASSES.items():
                typed = self.fields[name].text().strip()
                if typed:
                    set_secret(cls.key_name, typed)
                elif name in self.removed:
                    set_secret(cls.key_name, None)
        except Exception as error:
            problem = keyring_problem()
            names = ", ".join(key_env_name(name) for name in PROVIDER_CLASSES)
            self.error.setText(
                f"<b>Not stored:</b> the system keyring refused ({type(error).__name__}). "
                f"{problem[:1].upper() + problem[1:] if problem else ''} Or set {names} in the environment."
            )
            self.error.show()
            return
        for field in self.fields.values():
            field.clear()  # a key typed is never kept in the window
        super().accept()
