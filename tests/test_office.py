"""The Word and CSV exports opened in LibreOffice, as a person would open them (issue 14's done-when). Not in
the unit subset: it starts LibreOffice, which `make test` installs (libreoffice-writer/calc-nogui)."""

from __future__ import annotations

import re
from pathlib import Path

from app.core.transcript import save
from tests.core.transcript.test_export_formats import with_tricky_text


def test_word_and_csv_exports_open_in_libreoffice(tmp_path: Path) -> None:
    """Issue 14's done-when: the docx opens in a word processor and the CSV in a spreadsheet, with speakers and
    times. LibreOffice (installed by `make test`) converts each as it opens it: Writer to plain text, Calc to
    HTML, whose table is then read back."""
    import os
    import shutil
    import subprocess

    soffice = shutil.which("soffice")
    assert soffice is not None, "LibreOffice is installed by `make system-deps` (libreoffice-writer/calc-nogui)"
    written = save.save_transcript(with_tricky_text(), tmp_path, "talk", ["docx", "csv"], record=None).written
    # The CSV as Calc's import dialog takes it: comma-separated, quoted with ", UTF-8 (76, as the dialog
    # detects from the byte-order mark; without a dialog Calc would assume the system's 8-bit charset).
    for path, target, infilter in (
        (written[0], "txt:Text", []),
        (written[1], "html", ["--infilter=CSV:44,34,76,1"]),
    ):
        subprocess.run(
            [soffice, "--headless", *infilter, "--convert-to", target, "--outdir", str(tmp_path / "opened"), str(path)],
            check=True,
            capture_output=True,
            timeout=180,
            env={**os.environ, "HOME": str(tmp_path)},  # its own profile, not the user's
        )
    text = (tmp_path / "opened" / "talk.txt").read_text(encoding="utf-8-sig")
    assert "00:00:00  SPEAKER_00: Hello there. And you?" in text and "01:02:03  SPEAKER_01: Fine, <thanks>" in text
    table = (tmp_path / "opened" / "talk.html").read_text(encoding="utf-8", errors="replace")
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", table, re.S)]
    assert cells[:6] == ["start", "end", "start_seconds", "end_seconds", "speaker", "text"]
    # Times are read as times (Calc shows them to the hundredth), speakers and text as text.
    assert "SPEAKER_01" in cells and "01:02:03.25" in cells and "Fine, &lt;thanks&gt;" in cells
    assert not any(cell.startswith("=") for cell in cells)  # nothing became a formula
