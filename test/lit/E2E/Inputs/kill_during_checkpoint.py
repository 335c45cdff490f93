"""Starts sdrun with --test-checkpoint-stall=STALL_POINT, waits until it
reports that it stalled inside a checkpoint write, and kills it with SIGKILL.

usage: kill_during_checkpoint.py STALL_POINT -- SDRUN ARGS...
Exits 0 when the process was killed by SIGKILL while stalled, 1 otherwise.
"""
import signal
import subprocess
import sys

point = sys.argv[1]
assert sys.argv[2] == "--"
command = sys.argv[3:] + ["--test-checkpoint-stall=" + point]
process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
stalled = False
for line in process.stderr:
    sys.stderr.write(line)
    if "checkpoint write stalled" in line:
        stalled = True
        process.send_signal(signal.SIGKILL)
        break
code = process.wait()
if not stalled:
    print("sdrun exited with %d before stalling in a checkpoint write" % code)
    sys.exit(1)
if code != -signal.SIGKILL:
    print("sdrun was not killed by SIGKILL: %d" % code)
    sys.exit(1)
print("killed sdrun with SIGKILL during the %s write" % point)
