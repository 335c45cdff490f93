// RUN: sdopt %s -split-input-file -verify-diagnostics

// One case per constraint of #sd.sharding_rule (and of the dialect's
// `sd.sharding_rule` attribute on ops), then the parse errors of its syntax.

//===----------------------------------------------------------------------===//
// Constraints of the attribute itself
//===----------------------------------------------------------------------===//

// expected-error @+1 {{factor 'j' has size 0; sizes must be positive}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=0}>}

// -----

// expected-error @+1 {{result #0 uses factor 'k', which has no size}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i, k]) {i=2, j=4}>}

// -----

// expected-error @+1 {{operand #1 uses factor 'i' twice}}
func.func @f() attributes {rule = #sd.sharding_rule<([i], [ii]) -> ([i]) {i=2}>}

// -----

// expected-error @+1 {{reduction factor 'k' has no size}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i]) {i=2, j=4}, reduction={k}>}

// -----

// expected-error @+1 {{factor 'j' is listed twice as need_replication}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}, need_replication={j, j}>}

// -----

// expected-error @+1 {{factor 'j' is both reduction and need_replication}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i]) {i=2, j=4}, reduction={j}, need_replication={j}>}

//===----------------------------------------------------------------------===//
// Constraints on an op
//===----------------------------------------------------------------------===//

// -----

func.func @operand_count(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{sharding rule has 2 operand mappings but the op has 1 operands}}
  %y = sd.exp %x {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>} : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @result_count(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{sharding rule has 0 result mappings but the op has 1 results}}
  %y = sd.exp %x {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> () {i=2, j=4}>} : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @rank(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{sharding rule maps 1 dimensions of result #0, which has rank 2}}
  %y = sd.exp %x {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([ij]) {i=2, j=4}>} : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @product(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{dimension 1 of operand #0 has size 4 but its factors 'jk' multiply to 8}}
  %y = sd.exp %x {sd.sharding_rule = #sd.sharding_rule<([i, jk]) -> ([i, jk]) {i=2, j=2, k=4}>} : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @no_factor(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{dimension 1 of result #0 has size 4 but maps to no factor ('1')}}
  %y = sd.exp %x {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, 1]) {i=2, j=4}>} : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @not_a_rule(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'sd.sharding_rule' must be a #sd.sharding_rule, not "ij"}}
  %y = sd.exp %x {sd.sharding_rule = "ij"} : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

//===----------------------------------------------------------------------===//
// Syntax
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{expected the size of factor 'j', not of 'k'; sizes list factors in order i, j, k, ...}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, k=4}>}

// -----

// expected-error @+1 {{'ab' is not a list of factor names (i, j, ..., z, z_1, ...)}}
func.func @f() attributes {rule = #sd.sharding_rule<([ab]) -> ([i]) {i=2}>}

// -----

// expected-error @+1 {{'z_0' is not a list of factor names (i, j, ..., z, z_1, ...)}}
func.func @f() attributes {rule = #sd.sharding_rule<([z_0]) -> ([i]) {i=2}>}

// -----

// expected-error @+1 {{a dimension without factors is written '1', not '2'}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, 2]) -> ([i]) {i=2}>}

// -----

// expected-error @+1 {{'jk' is not a factor name}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, jk]) -> ([i]) {i=2, j=2, k=2}, reduction={jk}>}

// -----

// expected-error @+1 {{expected 'reduction' or 'need_replication', each at most once and in this order}}
func.func @f() attributes {rule = #sd.sharding_rule<([i, j]) -> ([i]) {i=2, j=4}, need_replication={j}, reduction={i}>}
