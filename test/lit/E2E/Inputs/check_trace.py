"""Checks a Chrome trace written by sdrun --trace: valid JSON, one named
track per device plus the host's, and spans of each category on every
device. usage: check_trace.py TRACE.json DEVICES"""
import collections
import json
import sys

trace = json.load(open(sys.argv[1]))
devices = int(sys.argv[2])
events = trace["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events
         if e.get("ph") == "M" and e.get("name") == "thread_name"}
device_tracks = {tid: name for tid, name in names.items()
                 if name.startswith("device ")}
assert len(device_tracks) == devices, names
assert any(name.startswith("host") for name in names.values()), names
spans = [e for e in events if e.get("ph") == "X"]
per_track = collections.defaultdict(collections.Counter)
for e in spans:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    per_track[e["tid"]][e["cat"]] += 1
for tid in device_tracks:
    assert per_track[tid]["kernel"] > 0, (tid, per_track[tid])
    assert per_track[tid]["gemm"] > 0, (tid, per_track[tid])
    if devices > 1:
        assert per_track[tid]["collective"] > 0, (tid, per_track[tid])
gemm = next(e for e in spans if e["cat"] == "gemm")
assert gemm["args"]["flops"] > 0 and gemm["args"]["bytes"] > 0, gemm
for name in sorted(device_tracks.values()):
    print(name)
print("spans per device:", sum(per_track[t]["kernel"] + per_track[t]["gemm"]
                               for t in device_tracks) // devices > 0)
