"""A pseudo-terminal for the watched command when ``warehouse watch`` writes to a terminal.

Training libraries look at their output before they draw: tqdm sizes its bar to the
terminal, Rich and Keras draw live progress only on a terminal and print plain lines into a
pipe. Run from a terminal without ``watch``, a script draws bars; given pipes, it would
print something else. So when our stdout (or stderr) is a terminal, the command's goes to
the slave side of a new pseudo-terminal with the same window size (kept in step on
``SIGWINCH``), and the pass-through reads the master side. Output post-processing is off on
the slave (no ``\\n`` → ``\\r\\n``), so the bytes we pass on are the bytes the command
wrote, and our terminal treats them as it would have without us. The command stays in our
session and process group: Ctrl-C and the keyboard still reach it, stdin is untouched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios


def open_terminal(like_fd: int) -> tuple[int, int]:
    """A new pseudo-terminal ``(master, slave)`` sized like the terminal on ``like_fd``."""
    master, slave = os.openpty()
    try:
        copy_size(like_fd, master)
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST  # the command's bytes unchanged
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    except OSError:
        os.close(master)
        os.close(slave)
        raise
    return master, slave


def copy_size(src_fd: int, dst_fd: int) -> None:
    """Give the terminal on ``dst_fd`` the window size of the one on ``src_fd``."""
    with contextlib.suppress(OSError):
        size = fcntl.ioctl(src_fd, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        if struct.unpack("HHHH", size)[:2] != (0, 0):
            fcntl.ioctl(dst_fd, termios.TIOCSWINSZ, size)


__all__ = ["copy_size", "open_terminal"]
