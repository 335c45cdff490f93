"""Starts sdrun with --test-checkpoint-stall=STALL_POINT, waits until it
reports that it stalled inside a checkpoint write, and kills it with SIGKILL.

usage: kill_during_checkpoint.py STALL_POINT -- SDRUN ARGS...
Exits 0 when the process was killed by SIGKILL while stalled, 1 otherwise.

When the command is an MPI job (it runs mpirun), the stalled rank's process
(the pid its message names) is killed, and the job must then end non-zero.
"""
import os
import re
import signal
import subprocess
import sys

point = sys.argv[1]
assert sys.argv[2] == "--"
command = sys.argv[3:] + ["--test-checkpoint-stall=" + point]
mpi = "mpirun" in command
process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
stalled = False
for line in process.stderr:
    sys.stderr.write(line)
    if "checkpoint write stalled" in line:
        stalled = True
        if mpi:
            os.kill(int(re.search(r"pid (\d+)", line).group(1)),
                    signal.SIGKILL)
        else:
            process.send_signal(signal.SIGKILL)
        break
# The rest of the job's errors (the other ranks') are shown, not waited on.
if mpi:
    sys.stderr.write(process.stderr.read())
code = process.wait()
if not stalled:
    print("sdrun exited with %d before stalling in a checkpoint write" % code)
    sys.exit(1)
if (code == 0) if mpi else (code != -signal.SIGKILL):
    print("sdrun was not killed by SIGKILL: %d" % code)
    sys.exit(1)
print("killed sdrun with SIGKILL during the %s write" % point)
