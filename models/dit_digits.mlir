// sdgen --preset=dit-digits
module {
  func.func private @dit_block(%arg0: tensor<?x16x128xf32>, %arg1: tensor<?x128xf32>, %arg2: tensor<3x128x128xf32>, %arg3: tensor<3x128xf32>, %arg4: tensor<128x128xf32>, %arg5: tensor<128xf32>, %arg6: tensor<512x128xf32>, %arg7: tensor<512xf32>, %arg8: tensor<128x512xf32>, %arg9: tensor<128xf32>, %arg10: tensor<6x128x128xf32>, %arg11: tensor<6x128xf32>) -> tensor<?x16x128xf32> {
    %0 = sd.dot_general %arg1, %arg10 batch = [] x [] contract = [1] x [2] : (tensor<?x128xf32>, tensor<6x128x128xf32>) -> tensor<?x6x128xf32>
    %1 = sd.broadcast_in_dim %arg11 dims = [1, 2] : (tensor<6x128xf32>) -> tensor<?x6x128xf32>
    %2 = sd.add %0, %1 : tensor<?x6x128xf32>
    %3 = sd.slice %2 start = [0, 0, 0] limit = [-1, 1, 128] strides = [1, 1, 1] : (tensor<?x6x128xf32>) -> tensor<?x1x128xf32>
    %4 = sd.reshape %3 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %5 = sd.slice %2 start = [0, 1, 0] limit = [-1, 2, 128] strides = [1, 1, 1] : (tensor<?x6x128xf32>) -> tensor<?x1x128xf32>
    %6 = sd.reshape %5 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %7 = sd.slice %2 start = [0, 2, 0] limit = [-1, 3, 128] strides = [1, 1, 1] : (tensor<?x6x128xf32>) -> tensor<?x1x128xf32>
    %8 = sd.reshape %7 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %9 = sd.slice %2 start = [0, 3, 0] limit = [-1, 4, 128] strides = [1, 1, 1] : (tensor<?x6x128xf32>) -> tensor<?x1x128xf32>
    %10 = sd.reshape %9 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %11 = sd.slice %2 start = [0, 4, 0] limit = [-1, 5, 128] strides = [1, 1, 1] : (tensor<?x6x128xf32>) -> tensor<?x1x128xf32>
    %12 = sd.reshape %11 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %13 = sd.slice %2 start = [0, 5, 0] limit = [-1, 6, 128] strides = [1, 1, 1] : (tensor<?x6x128xf32>) -> tensor<?x1x128xf32>
    %14 = sd.reshape %13 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %15 = sd.layer_norm %arg0 : (tensor<?x16x128xf32>) -> tensor<?x16x128xf32>
    %16 = sd.broadcast_in_dim %6 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %17 = sd.broadcast_in_dim %4 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %18 = sd.mul %15, %16 : tensor<?x16x128xf32>
    %19 = sd.add %15, %18 : tensor<?x16x128xf32>
    %20 = sd.add %19, %17 : tensor<?x16x128xf32>
    %21 = sd.dot_general %20, %arg2 batch = [] x [] contract = [2] x [2] : (tensor<?x16x128xf32>, tensor<3x128x128xf32>) -> tensor<?x16x3x128xf32>
    %22 = sd.broadcast_in_dim %arg3 dims = [2, 3] : (tensor<3x128xf32>) -> tensor<?x16x3x128xf32>
    %23 = sd.add %21, %22 : tensor<?x16x3x128xf32>
    %24 = sd.slice %23 start = [0, 0, 0, 0] limit = [-1, 16, 1, 128] strides = [1, 1, 1, 1] : (tensor<?x16x3x128xf32>) -> tensor<?x16x1x128xf32>
    %25 = sd.reshape %24 {sd.name = "query_proj"} : (tensor<?x16x1x128xf32>) -> tensor<?x16x128xf32>
    %26 = sd.slice %23 start = [0, 0, 1, 0] limit = [-1, 16, 2, 128] strides = [1, 1, 1, 1] : (tensor<?x16x3x128xf32>) -> tensor<?x16x1x128xf32>
    %27 = sd.reshape %26 {sd.name = "key_proj"} : (tensor<?x16x1x128xf32>) -> tensor<?x16x128xf32>
    %28 = sd.slice %23 start = [0, 0, 2, 0] limit = [-1, 16, 3, 128] strides = [1, 1, 1, 1] : (tensor<?x16x3x128xf32>) -> tensor<?x16x1x128xf32>
    %29 = sd.reshape %28 {sd.name = "value_proj"} : (tensor<?x16x1x128xf32>) -> tensor<?x16x128xf32>
    %30 = sd.reshape %25 : (tensor<?x16x128xf32>) -> tensor<?x16x4x32xf32>
    %31 = sd.transpose %30 permutation = [0, 2, 1, 3] {sd.name = "xq_out"} : (tensor<?x16x4x32xf32>) -> tensor<?x4x16x32xf32>
    %32 = sd.reshape %27 : (tensor<?x16x128xf32>) -> tensor<?x16x4x32xf32>
    %33 = sd.transpose %32 permutation = [0, 2, 1, 3] {sd.name = "xk_out"} : (tensor<?x16x4x32xf32>) -> tensor<?x4x16x32xf32>
    %34 = sd.reshape %29 : (tensor<?x16x128xf32>) -> tensor<?x16x4x32xf32>
    %35 = sd.transpose %34 permutation = [0, 2, 1, 3] : (tensor<?x16x4x32xf32>) -> tensor<?x4x16x32xf32>
    %36 = sd.sharding_constraint %31 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x16x32xf32>
    %37 = sd.sharding_constraint %33 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x16x32xf32>
    %38 = sd.sharding_constraint %35 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x16x32xf32>
    %39 = sd.attention %36, %37, %38 : (tensor<?x4x16x32xf32>, tensor<?x4x16x32xf32>, tensor<?x4x16x32xf32>) -> tensor<?x4x16x32xf32>
    %40 = sd.transpose %39 permutation = [0, 2, 1, 3] : (tensor<?x4x16x32xf32>) -> tensor<?x16x4x32xf32>
    %41 = sd.reshape %40 {sd.name = "attn_output"} : (tensor<?x16x4x32xf32>) -> tensor<?x16x128xf32>
    %42 = sd.dot_general %41, %arg4 batch = [] x [] contract = [2] x [1] : (tensor<?x16x128xf32>, tensor<128x128xf32>) -> tensor<?x16x128xf32>
    %43 = sd.broadcast_in_dim %arg5 dims = [2] : (tensor<128xf32>) -> tensor<?x16x128xf32>
    %44 = sd.add %42, %43 : tensor<?x16x128xf32>
    %45 = sd.broadcast_in_dim %8 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %46 = sd.mul %45, %44 : tensor<?x16x128xf32>
    %47 = sd.add %arg0, %46 : tensor<?x16x128xf32>
    %48 = sd.layer_norm %47 : (tensor<?x16x128xf32>) -> tensor<?x16x128xf32>
    %49 = sd.broadcast_in_dim %12 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %50 = sd.broadcast_in_dim %10 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %51 = sd.mul %48, %49 : tensor<?x16x128xf32>
    %52 = sd.add %48, %51 : tensor<?x16x128xf32>
    %53 = sd.add %52, %50 : tensor<?x16x128xf32>
    %54 = sd.dot_general %53, %arg6 batch = [] x [] contract = [2] x [1] : (tensor<?x16x128xf32>, tensor<512x128xf32>) -> tensor<?x16x512xf32>
    %55 = sd.broadcast_in_dim %arg7 dims = [2] : (tensor<512xf32>) -> tensor<?x16x512xf32>
    %56 = sd.add %54, %55 : tensor<?x16x512xf32>
    %57 = sd.gelu %56 {sd.name = "ffn_activation"} : tensor<?x16x512xf32>
    %58 = sd.dot_general %57, %arg8 batch = [] x [] contract = [2] x [1] : (tensor<?x16x512xf32>, tensor<128x512xf32>) -> tensor<?x16x128xf32>
    %59 = sd.broadcast_in_dim %arg9 dims = [2] : (tensor<128xf32>) -> tensor<?x16x128xf32>
    %60 = sd.add %58, %59 : tensor<?x16x128xf32>
    %61 = sd.broadcast_in_dim %14 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %62 = sd.mul %61, %60 : tensor<?x16x128xf32>
    %63 = sd.add %47, %62 {sd.name = "hidden_states"} : tensor<?x16x128xf32>
    return %63 : tensor<?x16x128xf32>
  }
  func.func @loss(%arg0: tensor<128x4xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[128, 1, 2, 2]>}, %arg1: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"x_embedder.proj.bias", zeros>}, %arg2: tensor<128x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"t_embedder.mlp.0.weight", normal(0.02)>}, %arg3: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"t_embedder.mlp.0.bias", zeros>}, %arg4: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"t_embedder.mlp.2.weight", normal(0.02)>}, %arg5: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"t_embedder.mlp.2.bias", zeros>}, %arg6: tensor<11x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}, %arg7: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg8: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.bias", zeros, stored[384]>}, %arg9: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.0.attn.proj.weight", xavier_uniform>}, %arg10: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.attn.proj.bias", zeros>}, %arg11: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.mlp.fc1.weight", xavier_uniform>}, %arg12: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc1.bias", zeros>}, %arg13: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc2.weight", xavier_uniform>}, %arg14: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.mlp.fc2.bias", zeros>}, %arg15: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg16: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg17: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.1.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg18: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.1.attn.qkv.bias", zeros, stored[384]>}, %arg19: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.1.attn.proj.weight", xavier_uniform>}, %arg20: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.attn.proj.bias", zeros>}, %arg21: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.1.mlp.fc1.weight", xavier_uniform>}, %arg22: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc1.bias", zeros>}, %arg23: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc2.weight", xavier_uniform>}, %arg24: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.mlp.fc2.bias", zeros>}, %arg25: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg26: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg27: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.2.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg28: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.2.attn.qkv.bias", zeros, stored[384]>}, %arg29: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.2.attn.proj.weight", xavier_uniform>}, %arg30: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.2.attn.proj.bias", zeros>}, %arg31: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.2.mlp.fc1.weight", xavier_uniform>}, %arg32: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.2.mlp.fc1.bias", zeros>}, %arg33: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.2.mlp.fc2.weight", xavier_uniform>}, %arg34: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.2.mlp.fc2.bias", zeros>}, %arg35: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.2.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg36: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.2.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg37: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.3.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg38: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.3.attn.qkv.bias", zeros, stored[384]>}, %arg39: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.3.attn.proj.weight", xavier_uniform>}, %arg40: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.3.attn.proj.bias", zeros>}, %arg41: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.3.mlp.fc1.weight", xavier_uniform>}, %arg42: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.3.mlp.fc1.bias", zeros>}, %arg43: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.3.mlp.fc2.weight", xavier_uniform>}, %arg44: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.3.mlp.fc2.bias", zeros>}, %arg45: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.3.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg46: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.3.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg47: tensor<4x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}, %arg48: tensor<4xf32> {sd.logical_axes = #sd.logical_axes<[_]>, sd.role = #sd.param<"final_layer.linear.bias", zeros>}, %arg49: tensor<2x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.weight", zeros, stored[256, 128]>}, %arg50: tensor<2x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.bias", zeros, stored[256]>}, %arg51: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %arg52: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}, %arg53: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %arg54: tensor<?x11xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}) -> tensor<f32> attributes {sd.default_batch = 64 : i64, sd.prediction_type = #sd.prediction<epsilon>} {
    %0 = sd.constant dense<1.57079637> : tensor<f32>
    %1 = sd.broadcast_in_dim %0 dims = [] : (tensor<f32>) -> tensor<?xf32>
    %2 = sd.mul %arg53, %1 : tensor<?xf32>
    %3 = sd.cos %2 : tensor<?xf32>
    %4 = sd.broadcast_in_dim %3 dims = [0] : (tensor<?xf32>) -> tensor<?x8x8x1xf32>
    %5 = sd.mul %4, %arg51 : tensor<?x8x8x1xf32>
    %6 = sd.sin %2 : tensor<?xf32>
    %7 = sd.broadcast_in_dim %6 dims = [0] : (tensor<?xf32>) -> tensor<?x8x8x1xf32>
    %8 = sd.mul %7, %arg52 : tensor<?x8x8x1xf32>
    %9 = sd.add %5, %8 : tensor<?x8x8x1xf32>
    %10 = sd.reshape %9 : (tensor<?x8x8x1xf32>) -> tensor<?x4x2x4x2x1xf32>
    %11 = sd.transpose %10 permutation = [0, 1, 3, 5, 2, 4] : (tensor<?x4x2x4x2x1xf32>) -> tensor<?x4x4x1x2x2xf32>
    %12 = sd.reshape %11 : (tensor<?x4x4x1x2x2xf32>) -> tensor<?x16x4xf32>
    %13 = sd.dot_general %12, %arg0 batch = [] x [] contract = [2] x [1] : (tensor<?x16x4xf32>, tensor<128x4xf32>) -> tensor<?x16x128xf32>
    %14 = sd.broadcast_in_dim %arg1 dims = [2] : (tensor<128xf32>) -> tensor<?x16x128xf32>
    %15 = sd.add %13, %14 : tensor<?x16x128xf32>
    %16 = sd.iota dim = 0 : tensor<32xf32>
    %17 = sd.constant dense<-0.287823141> : tensor<32xf32>
    %18 = sd.mul %16, %17 : tensor<32xf32>
    %19 = sd.exp %18 : tensor<32xf32>
    %20 = sd.broadcast_in_dim %19 dims = [2] : (tensor<32xf32>) -> tensor<4x4x32xf32>
    %21 = sd.iota dim = 1 : tensor<4x4x32xf32>
    %22 = sd.mul %21, %20 : tensor<4x4x32xf32>
    %23 = sd.iota dim = 0 : tensor<4x4x32xf32>
    %24 = sd.mul %23, %20 : tensor<4x4x32xf32>
    %25 = sd.sin %22 : tensor<4x4x32xf32>
    %26 = sd.cos %22 : tensor<4x4x32xf32>
    %27 = sd.sin %24 : tensor<4x4x32xf32>
    %28 = sd.cos %24 : tensor<4x4x32xf32>
    %29 = sd.concat %25, %26, %27, %28 dim = 2 : (tensor<4x4x32xf32>, tensor<4x4x32xf32>, tensor<4x4x32xf32>, tensor<4x4x32xf32>) -> tensor<4x4x128xf32>
    %30 = sd.reshape %29 : (tensor<4x4x128xf32>) -> tensor<16x128xf32>
    %31 = sd.broadcast_in_dim %30 dims = [1, 2] : (tensor<16x128xf32>) -> tensor<?x16x128xf32>
    %32 = sd.add %15, %31 : tensor<?x16x128xf32>
    %33 = sd.iota dim = 0 : tensor<128xf32>
    %34 = sd.constant dense<-0.0719557852> : tensor<128xf32>
    %35 = sd.mul %33, %34 : tensor<128xf32>
    %36 = sd.exp %35 : tensor<128xf32>
    %37 = sd.constant dense<1.000000e+03> : tensor<128xf32>
    %38 = sd.mul %36, %37 : tensor<128xf32>
    %39 = sd.reshape %arg53 : (tensor<?xf32>) -> tensor<?x1xf32>
    %40 = sd.reshape %38 : (tensor<128xf32>) -> tensor<1x128xf32>
    %41 = sd.dot_general %39, %40 batch = [] x [] contract = [1] x [0] : (tensor<?x1xf32>, tensor<1x128xf32>) -> tensor<?x128xf32>
    %42 = sd.cos %41 : tensor<?x128xf32>
    %43 = sd.sin %41 : tensor<?x128xf32>
    %44 = sd.concat %42, %43 dim = 1 : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x256xf32>
    %45 = sd.dot_general %44, %arg2 batch = [] x [] contract = [1] x [1] : (tensor<?x256xf32>, tensor<128x256xf32>) -> tensor<?x128xf32>
    %46 = sd.broadcast_in_dim %arg3 dims = [1] : (tensor<128xf32>) -> tensor<?x128xf32>
    %47 = sd.add %45, %46 : tensor<?x128xf32>
    %48 = sd.silu %47 : tensor<?x128xf32>
    %49 = sd.dot_general %48, %arg4 batch = [] x [] contract = [1] x [1] : (tensor<?x128xf32>, tensor<128x128xf32>) -> tensor<?x128xf32>
    %50 = sd.broadcast_in_dim %arg5 dims = [1] : (tensor<128xf32>) -> tensor<?x128xf32>
    %51 = sd.add %49, %50 : tensor<?x128xf32>
    %52 = sd.dot_general %arg54, %arg6 batch = [] x [] contract = [1] x [0] : (tensor<?x11xf32>, tensor<11x128xf32>) -> tensor<?x128xf32>
    %53 = sd.add %51, %52 : tensor<?x128xf32>
    %54 = sd.silu %53 : tensor<?x128xf32>
    %55 = call @dit_block(%32, %54, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14, %arg15, %arg16) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %56 = call @dit_block(%55, %54, %arg17, %arg18, %arg19, %arg20, %arg21, %arg22, %arg23, %arg24, %arg25, %arg26) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %57 = call @dit_block(%56, %54, %arg27, %arg28, %arg29, %arg30, %arg31, %arg32, %arg33, %arg34, %arg35, %arg36) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %58 = call @dit_block(%57, %54, %arg37, %arg38, %arg39, %arg40, %arg41, %arg42, %arg43, %arg44, %arg45, %arg46) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %59 = sd.dot_general %54, %arg49 batch = [] x [] contract = [1] x [2] : (tensor<?x128xf32>, tensor<2x128x128xf32>) -> tensor<?x2x128xf32>
    %60 = sd.broadcast_in_dim %arg50 dims = [1, 2] : (tensor<2x128xf32>) -> tensor<?x2x128xf32>
    %61 = sd.add %59, %60 : tensor<?x2x128xf32>
    %62 = sd.slice %61 start = [0, 0, 0] limit = [-1, 1, 128] strides = [1, 1, 1] : (tensor<?x2x128xf32>) -> tensor<?x1x128xf32>
    %63 = sd.reshape %62 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %64 = sd.slice %61 start = [0, 1, 0] limit = [-1, 2, 128] strides = [1, 1, 1] : (tensor<?x2x128xf32>) -> tensor<?x1x128xf32>
    %65 = sd.reshape %64 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %66 = sd.layer_norm %58 : (tensor<?x16x128xf32>) -> tensor<?x16x128xf32>
    %67 = sd.broadcast_in_dim %65 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %68 = sd.broadcast_in_dim %63 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %69 = sd.mul %66, %67 : tensor<?x16x128xf32>
    %70 = sd.add %66, %69 : tensor<?x16x128xf32>
    %71 = sd.add %70, %68 : tensor<?x16x128xf32>
    %72 = sd.dot_general %71, %arg47 batch = [] x [] contract = [2] x [1] : (tensor<?x16x128xf32>, tensor<4x128xf32>) -> tensor<?x16x4xf32>
    %73 = sd.broadcast_in_dim %arg48 dims = [2] : (tensor<4xf32>) -> tensor<?x16x4xf32>
    %74 = sd.add %72, %73 : tensor<?x16x4xf32>
    %75 = sd.reshape %74 : (tensor<?x16x4xf32>) -> tensor<?x4x4x2x2x1xf32>
    %76 = sd.transpose %75 permutation = [0, 1, 3, 2, 4, 5] : (tensor<?x4x4x2x2x1xf32>) -> tensor<?x4x2x4x2x1xf32>
    %77 = sd.reshape %76 : (tensor<?x4x2x4x2x1xf32>) -> tensor<?x8x8x1xf32>
    %78 = sd.mse_loss %77, %arg52 : tensor<?x8x8x1xf32>
    return %78 : tensor<f32>
  }
  func.func @denoise(%arg0: tensor<128x4xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[128, 1, 2, 2]>}, %arg1: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"x_embedder.proj.bias", zeros>}, %arg2: tensor<128x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"t_embedder.mlp.0.weight", normal(0.02)>}, %arg3: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"t_embedder.mlp.0.bias", zeros>}, %arg4: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"t_embedder.mlp.2.weight", normal(0.02)>}, %arg5: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"t_embedder.mlp.2.bias", zeros>}, %arg6: tensor<11x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}, %arg7: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg8: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.bias", zeros, stored[384]>}, %arg9: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.0.attn.proj.weight", xavier_uniform>}, %arg10: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.attn.proj.bias", zeros>}, %arg11: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.mlp.fc1.weight", xavier_uniform>}, %arg12: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc1.bias", zeros>}, %arg13: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc2.weight", xavier_uniform>}, %arg14: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.mlp.fc2.bias", zeros>}, %arg15: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg16: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg17: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.1.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg18: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.1.attn.qkv.bias", zeros, stored[384]>}, %arg19: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.1.attn.proj.weight", xavier_uniform>}, %arg20: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.attn.proj.bias", zeros>}, %arg21: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.1.mlp.fc1.weight", xavier_uniform>}, %arg22: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc1.bias", zeros>}, %arg23: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc2.weight", xavier_uniform>}, %arg24: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.mlp.fc2.bias", zeros>}, %arg25: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg26: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg27: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.2.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg28: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.2.attn.qkv.bias", zeros, stored[384]>}, %arg29: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.2.attn.proj.weight", xavier_uniform>}, %arg30: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.2.attn.proj.bias", zeros>}, %arg31: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.2.mlp.fc1.weight", xavier_uniform>}, %arg32: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.2.mlp.fc1.bias", zeros>}, %arg33: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.2.mlp.fc2.weight", xavier_uniform>}, %arg34: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.2.mlp.fc2.bias", zeros>}, %arg35: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.2.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg36: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.2.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg37: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.3.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg38: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.3.attn.qkv.bias", zeros, stored[384]>}, %arg39: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.3.attn.proj.weight", xavier_uniform>}, %arg40: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.3.attn.proj.bias", zeros>}, %arg41: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.3.mlp.fc1.weight", xavier_uniform>}, %arg42: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.3.mlp.fc1.bias", zeros>}, %arg43: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.3.mlp.fc2.weight", xavier_uniform>}, %arg44: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.3.mlp.fc2.bias", zeros>}, %arg45: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.3.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg46: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.3.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg47: tensor<4x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}, %arg48: tensor<4xf32> {sd.logical_axes = #sd.logical_axes<[_]>, sd.role = #sd.param<"final_layer.linear.bias", zeros>}, %arg49: tensor<2x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.weight", zeros, stored[256, 128]>}, %arg50: tensor<2x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.bias", zeros, stored[256]>}, %arg51: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %arg52: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %arg53: tensor<?x11xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}) -> tensor<?x8x8x1xf32> attributes {sd.default_batch = 64 : i64} {
    %0 = sd.reshape %arg51 : (tensor<?x8x8x1xf32>) -> tensor<?x4x2x4x2x1xf32>
    %1 = sd.transpose %0 permutation = [0, 1, 3, 5, 2, 4] : (tensor<?x4x2x4x2x1xf32>) -> tensor<?x4x4x1x2x2xf32>
    %2 = sd.reshape %1 : (tensor<?x4x4x1x2x2xf32>) -> tensor<?x16x4xf32>
    %3 = sd.dot_general %2, %arg0 batch = [] x [] contract = [2] x [1] : (tensor<?x16x4xf32>, tensor<128x4xf32>) -> tensor<?x16x128xf32>
    %4 = sd.broadcast_in_dim %arg1 dims = [2] : (tensor<128xf32>) -> tensor<?x16x128xf32>
    %5 = sd.add %3, %4 : tensor<?x16x128xf32>
    %6 = sd.iota dim = 0 : tensor<32xf32>
    %7 = sd.constant dense<-0.287823141> : tensor<32xf32>
    %8 = sd.mul %6, %7 : tensor<32xf32>
    %9 = sd.exp %8 : tensor<32xf32>
    %10 = sd.broadcast_in_dim %9 dims = [2] : (tensor<32xf32>) -> tensor<4x4x32xf32>
    %11 = sd.iota dim = 1 : tensor<4x4x32xf32>
    %12 = sd.mul %11, %10 : tensor<4x4x32xf32>
    %13 = sd.iota dim = 0 : tensor<4x4x32xf32>
    %14 = sd.mul %13, %10 : tensor<4x4x32xf32>
    %15 = sd.sin %12 : tensor<4x4x32xf32>
    %16 = sd.cos %12 : tensor<4x4x32xf32>
    %17 = sd.sin %14 : tensor<4x4x32xf32>
    %18 = sd.cos %14 : tensor<4x4x32xf32>
    %19 = sd.concat %15, %16, %17, %18 dim = 2 : (tensor<4x4x32xf32>, tensor<4x4x32xf32>, tensor<4x4x32xf32>, tensor<4x4x32xf32>) -> tensor<4x4x128xf32>
    %20 = sd.reshape %19 : (tensor<4x4x128xf32>) -> tensor<16x128xf32>
    %21 = sd.broadcast_in_dim %20 dims = [1, 2] : (tensor<16x128xf32>) -> tensor<?x16x128xf32>
    %22 = sd.add %5, %21 : tensor<?x16x128xf32>
    %23 = sd.iota dim = 0 : tensor<128xf32>
    %24 = sd.constant dense<-0.0719557852> : tensor<128xf32>
    %25 = sd.mul %23, %24 : tensor<128xf32>
    %26 = sd.exp %25 : tensor<128xf32>
    %27 = sd.constant dense<1.000000e+03> : tensor<128xf32>
    %28 = sd.mul %26, %27 : tensor<128xf32>
    %29 = sd.reshape %arg52 : (tensor<?xf32>) -> tensor<?x1xf32>
    %30 = sd.reshape %28 : (tensor<128xf32>) -> tensor<1x128xf32>
    %31 = sd.dot_general %29, %30 batch = [] x [] contract = [1] x [0] : (tensor<?x1xf32>, tensor<1x128xf32>) -> tensor<?x128xf32>
    %32 = sd.cos %31 : tensor<?x128xf32>
    %33 = sd.sin %31 : tensor<?x128xf32>
    %34 = sd.concat %32, %33 dim = 1 : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x256xf32>
    %35 = sd.dot_general %34, %arg2 batch = [] x [] contract = [1] x [1] : (tensor<?x256xf32>, tensor<128x256xf32>) -> tensor<?x128xf32>
    %36 = sd.broadcast_in_dim %arg3 dims = [1] : (tensor<128xf32>) -> tensor<?x128xf32>
    %37 = sd.add %35, %36 : tensor<?x128xf32>
    %38 = sd.silu %37 : tensor<?x128xf32>
    %39 = sd.dot_general %38, %arg4 batch = [] x [] contract = [1] x [1] : (tensor<?x128xf32>, tensor<128x128xf32>) -> tensor<?x128xf32>
    %40 = sd.broadcast_in_dim %arg5 dims = [1] : (tensor<128xf32>) -> tensor<?x128xf32>
    %41 = sd.add %39, %40 : tensor<?x128xf32>
    %42 = sd.dot_general %arg53, %arg6 batch = [] x [] contract = [1] x [0] : (tensor<?x11xf32>, tensor<11x128xf32>) -> tensor<?x128xf32>
    %43 = sd.add %41, %42 : tensor<?x128xf32>
    %44 = sd.silu %43 : tensor<?x128xf32>
    %45 = call @dit_block(%22, %44, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14, %arg15, %arg16) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %46 = call @dit_block(%45, %44, %arg17, %arg18, %arg19, %arg20, %arg21, %arg22, %arg23, %arg24, %arg25, %arg26) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %47 = call @dit_block(%46, %44, %arg27, %arg28, %arg29, %arg30, %arg31, %arg32, %arg33, %arg34, %arg35, %arg36) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %48 = call @dit_block(%47, %44, %arg37, %arg38, %arg39, %arg40, %arg41, %arg42, %arg43, %arg44, %arg45, %arg46) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %49 = sd.dot_general %44, %arg49 batch = [] x [] contract = [1] x [2] : (tensor<?x128xf32>, tensor<2x128x128xf32>) -> tensor<?x2x128xf32>
    %50 = sd.broadcast_in_dim %arg50 dims = [1, 2] : (tensor<2x128xf32>) -> tensor<?x2x128xf32>
    %51 = sd.add %49, %50 : tensor<?x2x128xf32>
    %52 = sd.slice %51 start = [0, 0, 0] limit = [-1, 1, 128] strides = [1, 1, 1] : (tensor<?x2x128xf32>) -> tensor<?x1x128xf32>
    %53 = sd.reshape %52 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %54 = sd.slice %51 start = [0, 1, 0] limit = [-1, 2, 128] strides = [1, 1, 1] : (tensor<?x2x128xf32>) -> tensor<?x1x128xf32>
    %55 = sd.reshape %54 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %56 = sd.layer_norm %48 : (tensor<?x16x128xf32>) -> tensor<?x16x128xf32>
    %57 = sd.broadcast_in_dim %55 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %58 = sd.broadcast_in_dim %53 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %59 = sd.mul %56, %57 : tensor<?x16x128xf32>
    %60 = sd.add %56, %59 : tensor<?x16x128xf32>
    %61 = sd.add %60, %58 : tensor<?x16x128xf32>
    %62 = sd.dot_general %61, %arg47 batch = [] x [] contract = [2] x [1] : (tensor<?x16x128xf32>, tensor<4x128xf32>) -> tensor<?x16x4xf32>
    %63 = sd.broadcast_in_dim %arg48 dims = [2] : (tensor<4xf32>) -> tensor<?x16x4xf32>
    %64 = sd.add %62, %63 : tensor<?x16x4xf32>
    %65 = sd.reshape %64 : (tensor<?x16x4xf32>) -> tensor<?x4x4x2x2x1xf32>
    %66 = sd.transpose %65 permutation = [0, 1, 3, 2, 4, 5] : (tensor<?x4x4x2x2x1xf32>) -> tensor<?x4x2x4x2x1xf32>
    %67 = sd.reshape %66 : (tensor<?x4x2x4x2x1xf32>) -> tensor<?x8x8x1xf32>
    return %67 : tensor<?x8x8x1xf32>
  }
  func.func @forward(%arg0: tensor<128x4xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[128, 1, 2, 2]>}, %arg1: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"x_embedder.proj.bias", zeros>}, %arg2: tensor<128x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"t_embedder.mlp.0.weight", normal(0.02)>}, %arg3: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"t_embedder.mlp.0.bias", zeros>}, %arg4: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"t_embedder.mlp.2.weight", normal(0.02)>}, %arg5: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"t_embedder.mlp.2.bias", zeros>}, %arg6: tensor<11x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}, %arg7: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg8: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.bias", zeros, stored[384]>}, %arg9: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.0.attn.proj.weight", xavier_uniform>}, %arg10: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.attn.proj.bias", zeros>}, %arg11: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.mlp.fc1.weight", xavier_uniform>}, %arg12: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc1.bias", zeros>}, %arg13: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc2.weight", xavier_uniform>}, %arg14: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.mlp.fc2.bias", zeros>}, %arg15: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg16: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg17: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.1.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg18: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.1.attn.qkv.bias", zeros, stored[384]>}, %arg19: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.1.attn.proj.weight", xavier_uniform>}, %arg20: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.attn.proj.bias", zeros>}, %arg21: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.1.mlp.fc1.weight", xavier_uniform>}, %arg22: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc1.bias", zeros>}, %arg23: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc2.weight", xavier_uniform>}, %arg24: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.mlp.fc2.bias", zeros>}, %arg25: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg26: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg27: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.2.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg28: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.2.attn.qkv.bias", zeros, stored[384]>}, %arg29: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.2.attn.proj.weight", xavier_uniform>}, %arg30: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.2.attn.proj.bias", zeros>}, %arg31: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.2.mlp.fc1.weight", xavier_uniform>}, %arg32: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.2.mlp.fc1.bias", zeros>}, %arg33: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.2.mlp.fc2.weight", xavier_uniform>}, %arg34: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.2.mlp.fc2.bias", zeros>}, %arg35: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.2.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg36: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.2.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg37: tensor<3x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.3.attn.qkv.weight", xavier_uniform, stored[384, 128]>}, %arg38: tensor<3x128xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.3.attn.qkv.bias", zeros, stored[384]>}, %arg39: tensor<128x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.3.attn.proj.weight", xavier_uniform>}, %arg40: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.3.attn.proj.bias", zeros>}, %arg41: tensor<512x128xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.3.mlp.fc1.weight", xavier_uniform>}, %arg42: tensor<512xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.3.mlp.fc1.bias", zeros>}, %arg43: tensor<128x512xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.3.mlp.fc2.weight", xavier_uniform>}, %arg44: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.3.mlp.fc2.bias", zeros>}, %arg45: tensor<6x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.3.adaLN_modulation.1.weight", zeros, stored[768, 128]>}, %arg46: tensor<6x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.3.adaLN_modulation.1.bias", zeros, stored[768]>}, %arg47: tensor<4x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}, %arg48: tensor<4xf32> {sd.logical_axes = #sd.logical_axes<[_]>, sd.role = #sd.param<"final_layer.linear.bias", zeros>}, %arg49: tensor<2x128x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.weight", zeros, stored[256, 128]>}, %arg50: tensor<2x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.bias", zeros, stored[256]>}, %arg51: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %arg52: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %arg53: tensor<?x11xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}) -> tensor<?x8x8x1xf32> attributes {sd.default_batch = 64 : i64} {
    %0 = sd.reshape %arg51 : (tensor<?x8x8x1xf32>) -> tensor<?x4x2x4x2x1xf32>
    %1 = sd.transpose %0 permutation = [0, 1, 3, 5, 2, 4] : (tensor<?x4x2x4x2x1xf32>) -> tensor<?x4x4x1x2x2xf32>
    %2 = sd.reshape %1 : (tensor<?x4x4x1x2x2xf32>) -> tensor<?x16x4xf32>
    %3 = sd.dot_general %2, %arg0 batch = [] x [] contract = [2] x [1] : (tensor<?x16x4xf32>, tensor<128x4xf32>) -> tensor<?x16x128xf32>
    %4 = sd.broadcast_in_dim %arg1 dims = [2] : (tensor<128xf32>) -> tensor<?x16x128xf32>
    %5 = sd.add %3, %4 : tensor<?x16x128xf32>
    %6 = sd.iota dim = 0 : tensor<32xf32>
    %7 = sd.constant dense<-0.287823141> : tensor<32xf32>
    %8 = sd.mul %6, %7 : tensor<32xf32>
    %9 = sd.exp %8 : tensor<32xf32>
    %10 = sd.broadcast_in_dim %9 dims = [2] : (tensor<32xf32>) -> tensor<4x4x32xf32>
    %11 = sd.iota dim = 1 : tensor<4x4x32xf32>
    %12 = sd.mul %11, %10 : tensor<4x4x32xf32>
    %13 = sd.iota dim = 0 : tensor<4x4x32xf32>
    %14 = sd.mul %13, %10 : tensor<4x4x32xf32>
    %15 = sd.sin %12 : tensor<4x4x32xf32>
    %16 = sd.cos %12 : tensor<4x4x32xf32>
    %17 = sd.sin %14 : tensor<4x4x32xf32>
    %18 = sd.cos %14 : tensor<4x4x32xf32>
    %19 = sd.concat %15, %16, %17, %18 dim = 2 : (tensor<4x4x32xf32>, tensor<4x4x32xf32>, tensor<4x4x32xf32>, tensor<4x4x32xf32>) -> tensor<4x4x128xf32>
    %20 = sd.reshape %19 : (tensor<4x4x128xf32>) -> tensor<16x128xf32>
    %21 = sd.broadcast_in_dim %20 dims = [1, 2] : (tensor<16x128xf32>) -> tensor<?x16x128xf32>
    %22 = sd.add %5, %21 : tensor<?x16x128xf32>
    %23 = sd.iota dim = 0 : tensor<128xf32>
    %24 = sd.constant dense<-0.0719557852> : tensor<128xf32>
    %25 = sd.mul %23, %24 : tensor<128xf32>
    %26 = sd.exp %25 : tensor<128xf32>
    %27 = sd.constant dense<1.000000e+03> : tensor<128xf32>
    %28 = sd.mul %26, %27 : tensor<128xf32>
    %29 = sd.reshape %arg52 : (tensor<?xf32>) -> tensor<?x1xf32>
    %30 = sd.reshape %28 : (tensor<128xf32>) -> tensor<1x128xf32>
    %31 = sd.dot_general %29, %30 batch = [] x [] contract = [1] x [0] : (tensor<?x1xf32>, tensor<1x128xf32>) -> tensor<?x128xf32>
    %32 = sd.cos %31 : tensor<?x128xf32>
    %33 = sd.sin %31 : tensor<?x128xf32>
    %34 = sd.concat %32, %33 dim = 1 : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x256xf32>
    %35 = sd.dot_general %34, %arg2 batch = [] x [] contract = [1] x [1] : (tensor<?x256xf32>, tensor<128x256xf32>) -> tensor<?x128xf32>
    %36 = sd.broadcast_in_dim %arg3 dims = [1] : (tensor<128xf32>) -> tensor<?x128xf32>
    %37 = sd.add %35, %36 : tensor<?x128xf32>
    %38 = sd.silu %37 : tensor<?x128xf32>
    %39 = sd.dot_general %38, %arg4 batch = [] x [] contract = [1] x [1] : (tensor<?x128xf32>, tensor<128x128xf32>) -> tensor<?x128xf32>
    %40 = sd.broadcast_in_dim %arg5 dims = [1] : (tensor<128xf32>) -> tensor<?x128xf32>
    %41 = sd.add %39, %40 : tensor<?x128xf32>
    %42 = sd.dot_general %arg53, %arg6 batch = [] x [] contract = [1] x [0] : (tensor<?x11xf32>, tensor<11x128xf32>) -> tensor<?x128xf32>
    %43 = sd.add %41, %42 : tensor<?x128xf32>
    %44 = sd.silu %43 : tensor<?x128xf32>
    %45 = call @dit_block(%22, %44, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14, %arg15, %arg16) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %46 = call @dit_block(%45, %44, %arg17, %arg18, %arg19, %arg20, %arg21, %arg22, %arg23, %arg24, %arg25, %arg26) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %47 = call @dit_block(%46, %44, %arg27, %arg28, %arg29, %arg30, %arg31, %arg32, %arg33, %arg34, %arg35, %arg36) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %48 = call @dit_block(%47, %44, %arg37, %arg38, %arg39, %arg40, %arg41, %arg42, %arg43, %arg44, %arg45, %arg46) : (tensor<?x16x128xf32>, tensor<?x128xf32>, tensor<3x128x128xf32>, tensor<3x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<512x128xf32>, tensor<512xf32>, tensor<128x512xf32>, tensor<128xf32>, tensor<6x128x128xf32>, tensor<6x128xf32>) -> tensor<?x16x128xf32>
    %49 = sd.dot_general %44, %arg49 batch = [] x [] contract = [1] x [2] : (tensor<?x128xf32>, tensor<2x128x128xf32>) -> tensor<?x2x128xf32>
    %50 = sd.broadcast_in_dim %arg50 dims = [1, 2] : (tensor<2x128xf32>) -> tensor<?x2x128xf32>
    %51 = sd.add %49, %50 : tensor<?x2x128xf32>
    %52 = sd.slice %51 start = [0, 0, 0] limit = [-1, 1, 128] strides = [1, 1, 1] : (tensor<?x2x128xf32>) -> tensor<?x1x128xf32>
    %53 = sd.reshape %52 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %54 = sd.slice %51 start = [0, 1, 0] limit = [-1, 2, 128] strides = [1, 1, 1] : (tensor<?x2x128xf32>) -> tensor<?x1x128xf32>
    %55 = sd.reshape %54 : (tensor<?x1x128xf32>) -> tensor<?x128xf32>
    %56 = sd.layer_norm %48 : (tensor<?x16x128xf32>) -> tensor<?x16x128xf32>
    %57 = sd.broadcast_in_dim %55 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %58 = sd.broadcast_in_dim %53 dims = [0, 2] : (tensor<?x128xf32>) -> tensor<?x16x128xf32>
    %59 = sd.mul %56, %57 : tensor<?x16x128xf32>
    %60 = sd.add %56, %59 : tensor<?x16x128xf32>
    %61 = sd.add %60, %58 : tensor<?x16x128xf32>
    %62 = sd.dot_general %61, %arg47 batch = [] x [] contract = [2] x [1] : (tensor<?x16x128xf32>, tensor<4x128xf32>) -> tensor<?x16x4xf32>
    %63 = sd.broadcast_in_dim %arg48 dims = [2] : (tensor<4xf32>) -> tensor<?x16x4xf32>
    %64 = sd.add %62, %63 : tensor<?x16x4xf32>
    %65 = sd.reshape %64 : (tensor<?x16x4xf32>) -> tensor<?x4x4x2x2x1xf32>
    %66 = sd.transpose %65 permutation = [0, 1, 3, 2, 4, 5] : (tensor<?x4x4x2x2x1xf32>) -> tensor<?x4x2x4x2x1xf32>
    %67 = sd.reshape %66 : (tensor<?x4x2x4x2x1xf32>) -> tensor<?x8x8x1xf32>
    return %67 : tensor<?x8x8x1xf32>
  }
}
