// The report's predicted communication time per set of mesh axes, from the
// network model (sd/Sharding/Network.h). DiT-tiny's training step on
// data:2(dcn=2),fsdp:2: 2 processes of 2 devices; fsdp stays inside a
// process (ICI), data crosses processes (DCN) and data,fsdp does both.
//
// With 1 GB/s on both links and no latency the times are the bytes:
// - fsdp (ICI, N = 2, both members in the process): 673.9 kB / 1 GB/s
//   = 673.9 µs.
// - data (DCN, N = 2, one member per process): the device's 487.3 kB all
//   leave the process, whose 2 devices share its interface: 2 × 487.3 kB
//   / 1 GB/s = 974.6 µs.
// - data,fsdp (N = 4, 2 per process): of 11,334 B, 1/3 stays (3.8 µs at
//   ICI) and 2/3 leave, 2 devices at once (2 × 7.6 kB = 15.1 µs): 18.9 µs.
// With the defaults, latencies count: data has 22 all_reduces of 2 ring
// steps at 25 µs (1.1 ms) on top of its bytes.

// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:1,fsdp:2 --dcn-mesh=data:2 --train --report --ici-bandwidth=1GB/s --dcn-bandwidth=8Gb/s --ici-latency=0 --dcn-latency=0 | FileCheck %s --check-prefix=FLAT
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:1,fsdp:2 --dcn-mesh=data:2 --train --report | FileCheck %s --check-prefix=DEFAULT
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:1,fsdp:2 --dcn-mesh=data:2 --train --report=json --ici-bandwidth=1GB/s --dcn-bandwidth=8Gb/s --ici-latency=0 --dcn-latency=0 | %python -c "import json, sys; r = json.load(sys.stdin); [print(','.join(c['axes']), c['link'], c['group_size'], c['bytes_per_device'], '%.9f' % c['predicted_seconds']) for c in r['communication']]; print(r['network'])" | FileCheck %s --check-prefix=JSON

// FLAT: communication time per mesh axes (predicted: ICI 1.0 GB/s per device, 0.0 µs; DCN 1.0 GB/s per process, 0.0 µs)
// FLAT-NEXT: mesh axes           link         N   bytes sent   predicted
// FLAT-NEXT: fsdp                ICI          2     673.9 kB   673.9 µs
// FLAT-NEXT: data                DCN          2     487.3 kB   974.6 µs
// FLAT-NEXT: data,fsdp           ICI+DCN      4      11.3 kB    18.9 µs
// FLAT-NEXT: total                                    1.2 MB     1.67 ms

// DEFAULT: (predicted: ICI 10.0 GB/s per device, 1.0 µs; DCN 3.1 GB/s per process, 25.0 µs)
// DEFAULT: data                DCN          2     487.3 kB     1.41 ms

// The exact figures: bytes over the rate (bytes per second).
// JSON: fsdp ICI 2 673936 0.000673936
// JSON-NEXT: data DCN 2 487296 0.000974592
// JSON-NEXT: data,fsdp ICI+DCN 4 11334 0.000018890
// JSON-NEXT: {'dcn_bytes_per_second': 1000000000, 'dcn_latency_seconds': 0, 'ici_bytes_per_second': 1000000000, 'ici_latency_seconds': 0}

// Bad figures are one error naming the flag, on both tools; as a pass
// option, an error on the module.
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:2 --report --dcn-bandwidth=fast 2>&1 | FileCheck %s --check-prefix=BAD-BW
// BAD-BW: error: --dcn-bandwidth='fast' is not a bandwidth above zero (e.g. 100GB/s, 25Gb/s, 800MB/s; a plain number is GB/s)
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --report --ici-latency=soon 2>&1 | FileCheck %s --check-prefix=BAD-LAT
// BAD-LAT: error: --ici-latency='soon' is not a latency (e.g. 25us, 1.5ms, 800ns; a plain number is microseconds)
// RUN: not sdrun %sd_src_root/models/dit_tiny.mlir --ici-bandwidth=0 --steps=1 2>&1 | FileCheck %s --check-prefix=BWFLAG
// BWFLAG: sdrun: error: --ici-bandwidth='0' is not a bandwidth above zero
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir -sd-print-report="dcn-latency=-3us" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-PASS
// BAD-PASS: error: --dcn-latency='-3us' is not a latency
