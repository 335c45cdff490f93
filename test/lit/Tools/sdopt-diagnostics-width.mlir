// An error at a function's location shows its one-line signature cut to
// 160 columns around the caret, in sdopt and sdrun.
// RUN: sdgen --preset=dit-tiny -o %t.mlir 2>/dev/null
// RUN: sed -e '0,/\[batch, _, _, _\]/s//[batch, batch, _, _]/' %t.mlir > %t.twice.mlir
// RUN: not sdopt %t.twice.mlir --mesh=data:2 2> %t.sdopt
// RUN: FileCheck %s < %t.sdopt
// RUN: %python -c "import sys; lines = open(sys.argv[1]).read().splitlines(); sys.exit(max(map(len, lines[1:])) > 163)" %t.sdopt
// RUN: not sdrun %t.twice.mlir --mesh=data:2 2> %t.sdrun
// RUN: FileCheck %s < %t.sdrun
// RUN: %python -c "import sys; lines = open(sys.argv[1]).read().splitlines(); sys.exit(max(map(len, lines[1:])) > 163)" %t.sdrun
// A parse error in that signature too (cut on both sides: 160 columns and
// two "...").
// RUN: sed -e '0,/#sd.param</s/#sd.param</#sd.parm</' %t.mlir > %t.bad.mlir
// RUN: not sdopt %t.bad.mlir 2> %t.parse
// RUN: FileCheck %s --check-prefix=PARSE < %t.parse
// RUN: %python -c "import sys; lines = open(sys.argv[1]).read().splitlines(); sys.exit(max(map(len, lines[1:])) > 166)" %t.parse

// CHECK: error: tensor "latents" has logical name "batch" on dimensions 0 and 1
// CHECK-NEXT: {{^ *}}func.func @loss({{.*}}...{{$}}
// CHECK-NEXT: {{^ *\^$}}
// CHECK-NOT: error

// PARSE: error: unknown attribute `parm` in dialect `sd`
// PARSE-NEXT: {{^}}...{{.*}}sd.role = #sd.parm<"x_embedder.proj.weight"{{.*}}...{{$}}
// PARSE-NEXT: {{^ *\^$}}
