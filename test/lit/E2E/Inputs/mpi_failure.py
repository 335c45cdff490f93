"""Kills or stops rank 1 of a 2-rank sdrun job mid-run and reports how the
job ended: its exit status, the seconds from the signal to the end, and
the job's output (sdrun-mpi-failure.test checks them).

Usage: mpi_failure.py KILL|STOP SDRUN MODEL
"""
import os
import signal
import subprocess
import sys
import time


def rank_pid(marker, rank):
    """The pid of the sdrun process of `rank` whose command line holds
    `marker`, or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in cmdline and b"mpirun" not in cmdline and \
                f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
            return int(entry)
    return None


def main():
    how, sdrun, model = sys.argv[1:4]
    sig = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP}[how]
    marker = f"/tmp/sd-mpi-failure-{os.getpid()}.jsonl"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader,tcp")
    job = subprocess.Popen(
        ["timeout", "170", "mpirun", "--oversubscribe", "-np", "2", sdrun, model,
         "--mesh=data:1", "--dcn-mesh=data:2", "--steps=1000000",
         "--threads-per-device=1", "--collective-timeout=5",
         f"--metrics={marker}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    # Wait until the steps run (rank 0's metrics file has lines).
    pid = None
    deadline = time.time() + 120
    while time.time() < deadline and job.poll() is None:
        pid = pid or rank_pid(marker, 1)
        if pid and os.path.exists(marker) and os.path.getsize(marker) > 0:
            break
        time.sleep(0.2)
    if pid is None or job.poll() is not None:
        print("setup failed: the job did not start its steps")
        job.kill()
        print(job.communicate()[0].decode(errors="replace"))
        return 1
    os.kill(pid, sig)
    start = time.time()
    try:
        output = job.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        job.kill()
        output = job.communicate()[0]
    seconds = time.time() - start
    # A stopped rank that outlived the job is ended here.
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    if os.path.exists(marker):
        os.remove(marker)
    print(f"exit status {job.returncode}")
    print("ended within 60 s" if seconds < 60 else
          f"ended after {seconds:.0f} s")
    print(output.decode(errors="replace").replace("\r", "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
