"""The dictation panel, its model picker and the floating listening badge."""
