// PLAIN-LABEL: module
// PLAIN-NEXT: sd.mesh @mesh = <["data"=8, "fsdp"=4]>
// FILL: sd.mesh @mesh = <["data"=2, "fsdp"=4]>
// DCN: sd.mesh @mesh = <["fsdp"=4, "data"=2(dcn=2)]>
// BOTHFILL: sd.mesh @mesh = <["context"=16(dcn=2)]>
// NAMED: sd.mesh @tp = <["tensor"=2]>
// NAMED-NEXT: func.func @f
func.func @f() {
  return
}
