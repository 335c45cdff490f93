// Each preset follows its MaxDiffusion config; a real MaxDiffusion YAML
// config file gives the same result as its preset.
// RUN: sdopt %s -sd-apply-logical-rules="rules=wan" | FileCheck %s --check-prefix=WAN
// RUN: sdopt %s -sd-apply-logical-rules="rules=%sd_src_root/test/data/rules/base_wan_14b.yml" | FileCheck %s --check-prefix=WAN
// RUN: sdopt %s -sd-apply-logical-rules="rules=flux" | FileCheck %s --check-prefix=FLUX
// RUN: sdopt %s -sd-apply-logical-rules="rules=sdxl" | FileCheck %s --check-prefix=SDXL

sd.mesh @mesh = <["data"=2, "fsdp"=2, "context"=2, "tensor"=2]>

// WAN-LABEL: func.func @presets
// WAN-SAME: sd.sharding = #sd.sharding<@mesh, [{"context", "fsdp"}, {"tensor"}]>
// WAN-SAME: sd.sharding = #sd.sharding<@mesh, [{"tensor"}]>
// WAN-SAME: sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {"context"}, {}]>
// FLUX-LABEL: func.func @presets
// FLUX-SAME: sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>
// FLUX-SAME: sd.sharding = #sd.sharding<@mesh, [{}]>
// FLUX-SAME: sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {"context"}, {}]>
// SDXL-LABEL: func.func @presets
// SDXL-SAME: sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>
// SDXL-SAME: sd.sharding = #sd.sharding<@mesh, [{}]>
// SDXL-SAME: sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}, {}]>
func.func @presets(
    %w: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>},
    %s: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[norm]>},
    %x: tensor<8x16x64xf32> {sd.logical_axes = #sd.logical_axes<[activation_batch, activation_length, embed]>}) {
  return
}
