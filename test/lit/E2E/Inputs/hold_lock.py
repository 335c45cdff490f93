"""Runs a command while holding an exclusive flock on a file, as a second
sdrun writing checkpoints into the same directory would.
usage: hold_lock.py LOCKFILE -- COMMAND...; exits with the command's code."""
import fcntl
import subprocess
import sys

assert sys.argv[2] == "--"
with open(sys.argv[1], "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    sys.exit(subprocess.call(sys.argv[3:]))
