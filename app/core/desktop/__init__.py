"""The desktop around Scriba: text typed into (or copied for) whichever program has the focus, and a global
hotkey that works while another program has it. Qt-free, so the CLI and the window share it."""
