// Round trip of every sd op and attribute form, in the custom and in the
// generic syntax. One case per chunk; each names its function.

// Mesh axes with and without a DCN part; `(dcn=1)` is the default and is
// not printed.
sd.mesh @mesh = <["data"=8(dcn=2), "fsdp"=4, "tensor"=2(dcn=1)]>
sd.mesh @all_dcn = <["data"=2(dcn=2)]>
sd.mesh @single = <["data"=1]>
func.func @mesh_forms() {
  return
}
