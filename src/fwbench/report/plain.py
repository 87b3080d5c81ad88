"""Text from records, printed on a terminal as it reads: a record is data (a colleague's
imported JSON, a file's name, a framework's message), and neither Rich nor the terminal
may take it for instructions."""

from __future__ import annotations

import re

from rich.markup import escape as escape_markup

# C0 controls but tab and newline, DEL and C1: an escape sequence clears the screen,
# moves the cursor over what was printed, or hides a link behind a word; a carriage
# return overwrites a line.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """`text` with Rich markup escaped and every control character shown as U+FFFD."""
    return escape_markup(_CONTROL.sub("\ufffd", text))
