// #sd.sharding_rule and its parts round-trip; names follow the factor
// positions (i ... z, then z_1, z_2), so printing is deterministic.

func.func @matmul() attributes {rule = #sd.sharding_rule<([i, j], [j, k]) -> ([i, k]) {i=8, j=16, k=32}, reduction={j}>} {
  return
}

// Kind lists print only when not empty and come out sorted; compound
// factors and unmapped size-1 dimensions keep their spelling.
func.func @kinds() attributes {rule = #sd.sharding_rule<([ij, 1], [k]) -> ([i, jk]) {i=2, j=3, k=4}, reduction={k, i}, need_replication={j}>} {
  return
}

// A rule for a scalar-producing op with no operands, and one with no
// factors at all.
func.func @empty() attributes {a = #sd.sharding_rule<() -> ([]) {}>, b = #sd.sharding_rule<() -> ([i]) {i=4}, need_replication={i}>} {
  return
}

// Past z, factors are z_1, z_2, ...
func.func @many_factors() attributes {rule = #sd.sharding_rule<([ijklmnopqrstuvwxyzz_1z_2]) -> ([z_2, z_1]) {i=1, j=1, k=1, l=1, m=1, n=1, o=1, p=1, q=1, r=1, s=1, t=1, u=1, v=1, w=1, x=1, y=1, z=1, z_1=1, z_2=1}, reduction={z_1}>} {
  return
}

// The parts on their own.
func.func @parts() attributes {dim = #sd.dim_mapping<jz_1>, none = #sd.dim_mapping<1>, tensor = #sd.tensor_mapping<[i, jk, 1]>} {
  return
}

// On an op, the rule is checked against its types.
func.func @on_op(%x: tensor<6xf32>) -> tensor<2x3xf32> {
  %y = sd.reshape %x {sd.sharding_rule = #sd.sharding_rule<([ij]) -> ([i, j]) {i=2, j=3}>} : (tensor<6xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
