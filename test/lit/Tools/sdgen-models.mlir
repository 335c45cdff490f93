// The checked-in model programs are what the current sdgen writes; after a
// generator change, regenerate them with the command in their first line.
// RUN: sdgen --preset=dit-tiny 2>/dev/null | diff %sd_src_root/models/dit_tiny.mlir -
// RUN: sdgen --preset=dit-s2 2>/dev/null | diff %sd_src_root/models/dit_s2.mlir -
// RUN: sdgen --preset=dit-digits 2>/dev/null | diff %sd_src_root/models/dit_digits.mlir -
// The first line says how the file was made; -o is left out.
// RUN: sdgen --preset=dit-tiny -o %t.mlir 2>/dev/null
// RUN: head -n 1 %t.mlir | FileCheck %s
// CHECK: // sdgen --preset=dit-tiny{{$}}
