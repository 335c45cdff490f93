// An existing mesh of the same name is replaced, so the pass can be re-run.
// PLAIN-LABEL: module
// PLAIN: sd.mesh @mesh = <["data"=8, "fsdp"=4]>
// PLAIN-NOT: "tensor"=2
sd.mesh @mesh = <["tensor"=2]>
