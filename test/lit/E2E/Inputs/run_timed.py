"""Runs a command (an mpirun job) and reports how it ended: its exit
status, whether it ended within LIMIT seconds, and its output (stdout and
stderr together), so that a test can check that a job ends in time rather
than only that it failed.

Usage: run_timed.py LIMIT COMMAND [ARGS...]
"""
import subprocess
import sys
import time


def main():
    limit = float(sys.argv[1])
    start = time.time()
    job = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    try:
        output = job.communicate(timeout=limit + 120)[0]
    except subprocess.TimeoutExpired:
        job.kill()
        output = job.communicate()[0]
    seconds = time.time() - start
    print(f"exit status {job.returncode}")
    print(f"ended within {limit:.0f} s" if seconds < limit else
          f"ended after {seconds:.0f} s")
    print(output.decode(errors="replace").replace("\r", "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
