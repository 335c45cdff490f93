// sdgen --preset=dit-tiny
module {
  func.func private @dit_block(%arg0: tensor<?x256x64xf32>, %arg1: tensor<?x64xf32>, %arg2: tensor<3x64x64xf32>, %arg3: tensor<3x64xf32>, %arg4: tensor<64x64xf32>, %arg5: tensor<64xf32>, %arg6: tensor<256x64xf32>, %arg7: tensor<256xf32>, %arg8: tensor<64x256xf32>, %arg9: tensor<64xf32>, %arg10: tensor<6x64x64xf32>, %arg11: tensor<6x64xf32>) -> tensor<?x256x64xf32> {
    %0 = sd.dot_general %arg1, %arg10 batch = [] x [] contract = [1] x [2] : (tensor<?x64xf32>, tensor<6x64x64xf32>) -> tensor<?x6x64xf32>
    %1 = sd.broadcast_in_dim %arg11 dims = [1, 2] : (tensor<6x64xf32>) -> tensor<?x6x64xf32>
    %2 = sd.add %0, %1 : tensor<?x6x64xf32>
    %3 = sd.slice %2 start = [0, 0, 0] limit = [-1, 1, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
    %4 = sd.reshape %3 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %5 = sd.slice %2 start = [0, 1, 0] limit = [-1, 2, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
    %6 = sd.reshape %5 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %7 = sd.slice %2 start = [0, 2, 0] limit = [-1, 3, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
    %8 = sd.reshape %7 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %9 = sd.slice %2 start = [0, 3, 0] limit = [-1, 4, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
    %10 = sd.reshape %9 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %11 = sd.slice %2 start = [0, 4, 0] limit = [-1, 5, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
    %12 = sd.reshape %11 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %13 = sd.slice %2 start = [0, 5, 0] limit = [-1, 6, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
    %14 = sd.reshape %13 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %15 = sd.layer_norm %arg0 : (tensor<?x256x64xf32>) -> tensor<?x256x64xf32>
    %16 = sd.broadcast_in_dim %6 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %17 = sd.broadcast_in_dim %4 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %18 = sd.mul %15, %16 : tensor<?x256x64xf32>
    %19 = sd.add %15, %18 : tensor<?x256x64xf32>
    %20 = sd.add %19, %17 : tensor<?x256x64xf32>
    %21 = sd.dot_general %20, %arg2 batch = [] x [] contract = [2] x [2] : (tensor<?x256x64xf32>, tensor<3x64x64xf32>) -> tensor<?x256x3x64xf32>
    %22 = sd.broadcast_in_dim %arg3 dims = [2, 3] : (tensor<3x64xf32>) -> tensor<?x256x3x64xf32>
    %23 = sd.add %21, %22 : tensor<?x256x3x64xf32>
    %24 = sd.slice %23 start = [0, 0, 0, 0] limit = [-1, 256, 1, 64] strides = [1, 1, 1, 1] : (tensor<?x256x3x64xf32>) -> tensor<?x256x1x64xf32>
    %25 = sd.reshape %24 {sd.name = "query_proj"} : (tensor<?x256x1x64xf32>) -> tensor<?x256x64xf32>
    %26 = sd.slice %23 start = [0, 0, 1, 0] limit = [-1, 256, 2, 64] strides = [1, 1, 1, 1] : (tensor<?x256x3x64xf32>) -> tensor<?x256x1x64xf32>
    %27 = sd.reshape %26 {sd.name = "key_proj"} : (tensor<?x256x1x64xf32>) -> tensor<?x256x64xf32>
    %28 = sd.slice %23 start = [0, 0, 2, 0] limit = [-1, 256, 3, 64] strides = [1, 1, 1, 1] : (tensor<?x256x3x64xf32>) -> tensor<?x256x1x64xf32>
    %29 = sd.reshape %28 {sd.name = "value_proj"} : (tensor<?x256x1x64xf32>) -> tensor<?x256x64xf32>
    %30 = sd.reshape %25 : (tensor<?x256x64xf32>) -> tensor<?x256x4x16xf32>
    %31 = sd.transpose %30 permutation = [0, 2, 1, 3] {sd.name = "xq_out"} : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
    %32 = sd.reshape %27 : (tensor<?x256x64xf32>) -> tensor<?x256x4x16xf32>
    %33 = sd.transpose %32 permutation = [0, 2, 1, 3] {sd.name = "xk_out"} : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
    %34 = sd.reshape %29 : (tensor<?x256x64xf32>) -> tensor<?x256x4x16xf32>
    %35 = sd.transpose %34 permutation = [0, 2, 1, 3] : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
    %36 = sd.sharding_constraint %31 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x256x16xf32>
    %37 = sd.sharding_constraint %33 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x256x16xf32>
    %38 = sd.sharding_constraint %35 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x256x16xf32>
    %39 = sd.attention %36, %37, %38 : (tensor<?x4x256x16xf32>, tensor<?x4x256x16xf32>, tensor<?x4x256x16xf32>) -> tensor<?x4x256x16xf32>
    %40 = sd.transpose %39 permutation = [0, 2, 1, 3] : (tensor<?x4x256x16xf32>) -> tensor<?x256x4x16xf32>
    %41 = sd.reshape %40 {sd.name = "attn_output"} : (tensor<?x256x4x16xf32>) -> tensor<?x256x64xf32>
    %42 = sd.dot_general %41, %arg4 batch = [] x [] contract = [2] x [1] : (tensor<?x256x64xf32>, tensor<64x64xf32>) -> tensor<?x256x64xf32>
    %43 = sd.broadcast_in_dim %arg5 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %44 = sd.add %42, %43 : tensor<?x256x64xf32>
    %45 = sd.broadcast_in_dim %8 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %46 = sd.mul %45, %44 : tensor<?x256x64xf32>
    %47 = sd.add %arg0, %46 : tensor<?x256x64xf32>
    %48 = sd.layer_norm %47 : (tensor<?x256x64xf32>) -> tensor<?x256x64xf32>
    %49 = sd.broadcast_in_dim %12 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %50 = sd.broadcast_in_dim %10 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %51 = sd.mul %48, %49 : tensor<?x256x64xf32>
    %52 = sd.add %48, %51 : tensor<?x256x64xf32>
    %53 = sd.add %52, %50 : tensor<?x256x64xf32>
    %54 = sd.dot_general %53, %arg6 batch = [] x [] contract = [2] x [1] : (tensor<?x256x64xf32>, tensor<256x64xf32>) -> tensor<?x256x256xf32>
    %55 = sd.broadcast_in_dim %arg7 dims = [2] : (tensor<256xf32>) -> tensor<?x256x256xf32>
    %56 = sd.add %54, %55 : tensor<?x256x256xf32>
    %57 = sd.gelu %56 {sd.name = "ffn_activation"} : tensor<?x256x256xf32>
    %58 = sd.dot_general %57, %arg8 batch = [] x [] contract = [2] x [1] : (tensor<?x256x256xf32>, tensor<64x256xf32>) -> tensor<?x256x64xf32>
    %59 = sd.broadcast_in_dim %arg9 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %60 = sd.add %58, %59 : tensor<?x256x64xf32>
    %61 = sd.broadcast_in_dim %14 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %62 = sd.mul %61, %60 : tensor<?x256x64xf32>
    %63 = sd.add %47, %62 {sd.name = "hidden_states"} : tensor<?x256x64xf32>
    return %63 : tensor<?x256x64xf32>
  }
  func.func @loss(%arg0: tensor<64x16xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[64, 4, 2, 2]>}, %arg1: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"x_embedder.proj.bias", zeros>}, %arg2: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"t_embedder.mlp.0.weight", normal(0.02)>}, %arg3: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"t_embedder.mlp.0.bias", zeros>}, %arg4: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"t_embedder.mlp.2.weight", normal(0.02)>}, %arg5: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"t_embedder.mlp.2.bias", zeros>}, %arg6: tensor<1001x64xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}, %arg7: tensor<3x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.attn.qkv.weight", xavier_uniform, stored[192, 64]>}, %arg8: tensor<3x64xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.bias", zeros, stored[192]>}, %arg9: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.0.attn.proj.weight", xavier_uniform>}, %arg10: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.attn.proj.bias", zeros>}, %arg11: tensor<256x64xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.mlp.fc1.weight", xavier_uniform>}, %arg12: tensor<256xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc1.bias", zeros>}, %arg13: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc2.weight", xavier_uniform>}, %arg14: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.mlp.fc2.bias", zeros>}, %arg15: tensor<6x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.weight", zeros, stored[384, 64]>}, %arg16: tensor<6x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.bias", zeros, stored[384]>}, %arg17: tensor<3x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.1.attn.qkv.weight", xavier_uniform, stored[192, 64]>}, %arg18: tensor<3x64xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.1.attn.qkv.bias", zeros, stored[192]>}, %arg19: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.1.attn.proj.weight", xavier_uniform>}, %arg20: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.attn.proj.bias", zeros>}, %arg21: tensor<256x64xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.1.mlp.fc1.weight", xavier_uniform>}, %arg22: tensor<256xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc1.bias", zeros>}, %arg23: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc2.weight", xavier_uniform>}, %arg24: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.mlp.fc2.bias", zeros>}, %arg25: tensor<6x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.weight", zeros, stored[384, 64]>}, %arg26: tensor<6x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.bias", zeros, stored[384]>}, %arg27: tensor<32x64xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}, %arg28: tensor<32xf32> {sd.logical_axes = #sd.logical_axes<[_]>, sd.role = #sd.param<"final_layer.linear.bias", zeros>}, %arg29: tensor<2x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.weight", zeros, stored[128, 64]>}, %arg30: tensor<2x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.bias", zeros, stored[128]>}, %arg31: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %arg32: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}, %arg33: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %arg34: tensor<?x1001xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}) -> tensor<f32> attributes {sd.default_batch = 8 : i64, sd.prediction_type = #sd.prediction<flow>} {
    %0 = sd.sub %arg32, %arg31 : tensor<?x32x32x4xf32>
    %1 = sd.broadcast_in_dim %arg33 dims = [0] : (tensor<?xf32>) -> tensor<?x32x32x4xf32>
    %2 = sd.mul %1, %0 : tensor<?x32x32x4xf32>
    %3 = sd.add %arg31, %2 : tensor<?x32x32x4xf32>
    %4 = sd.reshape %3 : (tensor<?x32x32x4xf32>) -> tensor<?x16x2x16x2x4xf32>
    %5 = sd.transpose %4 permutation = [0, 1, 3, 5, 2, 4] : (tensor<?x16x2x16x2x4xf32>) -> tensor<?x16x16x4x2x2xf32>
    %6 = sd.reshape %5 : (tensor<?x16x16x4x2x2xf32>) -> tensor<?x256x16xf32>
    %7 = sd.dot_general %6, %arg0 batch = [] x [] contract = [2] x [1] : (tensor<?x256x16xf32>, tensor<64x16xf32>) -> tensor<?x256x64xf32>
    %8 = sd.broadcast_in_dim %arg1 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %9 = sd.add %7, %8 : tensor<?x256x64xf32>
    %10 = sd.iota dim = 0 : tensor<16xf32>
    %11 = sd.constant dense<-0.575646281> : tensor<16xf32>
    %12 = sd.mul %10, %11 : tensor<16xf32>
    %13 = sd.exp %12 : tensor<16xf32>
    %14 = sd.broadcast_in_dim %13 dims = [2] : (tensor<16xf32>) -> tensor<16x16x16xf32>
    %15 = sd.iota dim = 1 : tensor<16x16x16xf32>
    %16 = sd.mul %15, %14 : tensor<16x16x16xf32>
    %17 = sd.iota dim = 0 : tensor<16x16x16xf32>
    %18 = sd.mul %17, %14 : tensor<16x16x16xf32>
    %19 = sd.sin %16 : tensor<16x16x16xf32>
    %20 = sd.cos %16 : tensor<16x16x16xf32>
    %21 = sd.sin %18 : tensor<16x16x16xf32>
    %22 = sd.cos %18 : tensor<16x16x16xf32>
    %23 = sd.concat %19, %20, %21, %22 dim = 2 : (tensor<16x16x16xf32>, tensor<16x16x16xf32>, tensor<16x16x16xf32>, tensor<16x16x16xf32>) -> tensor<16x16x64xf32>
    %24 = sd.reshape %23 : (tensor<16x16x64xf32>) -> tensor<256x64xf32>
    %25 = sd.broadcast_in_dim %24 dims = [1, 2] : (tensor<256x64xf32>) -> tensor<?x256x64xf32>
    %26 = sd.add %9, %25 : tensor<?x256x64xf32>
    %27 = sd.iota dim = 0 : tensor<128xf32>
    %28 = sd.constant dense<-0.0719557852> : tensor<128xf32>
    %29 = sd.mul %27, %28 : tensor<128xf32>
    %30 = sd.exp %29 : tensor<128xf32>
    %31 = sd.constant dense<1.000000e+03> : tensor<128xf32>
    %32 = sd.mul %30, %31 : tensor<128xf32>
    %33 = sd.reshape %arg33 : (tensor<?xf32>) -> tensor<?x1xf32>
    %34 = sd.reshape %32 : (tensor<128xf32>) -> tensor<1x128xf32>
    %35 = sd.dot_general %33, %34 batch = [] x [] contract = [1] x [0] : (tensor<?x1xf32>, tensor<1x128xf32>) -> tensor<?x128xf32>
    %36 = sd.cos %35 : tensor<?x128xf32>
    %37 = sd.sin %35 : tensor<?x128xf32>
    %38 = sd.concat %36, %37 dim = 1 : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x256xf32>
    %39 = sd.dot_general %38, %arg2 batch = [] x [] contract = [1] x [1] : (tensor<?x256xf32>, tensor<64x256xf32>) -> tensor<?x64xf32>
    %40 = sd.broadcast_in_dim %arg3 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %41 = sd.add %39, %40 : tensor<?x64xf32>
    %42 = sd.silu %41 : tensor<?x64xf32>
    %43 = sd.dot_general %42, %arg4 batch = [] x [] contract = [1] x [1] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %44 = sd.broadcast_in_dim %arg5 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %45 = sd.add %43, %44 : tensor<?x64xf32>
    %46 = sd.dot_general %arg34, %arg6 batch = [] x [] contract = [1] x [0] : (tensor<?x1001xf32>, tensor<1001x64xf32>) -> tensor<?x64xf32>
    %47 = sd.add %45, %46 : tensor<?x64xf32>
    %48 = sd.silu %47 : tensor<?x64xf32>
    %49 = call @dit_block(%26, %48, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14, %arg15, %arg16) : (tensor<?x256x64xf32>, tensor<?x64xf32>, tensor<3x64x64xf32>, tensor<3x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<256x64xf32>, tensor<256xf32>, tensor<64x256xf32>, tensor<64xf32>, tensor<6x64x64xf32>, tensor<6x64xf32>) -> tensor<?x256x64xf32>
    %50 = call @dit_block(%49, %48, %arg17, %arg18, %arg19, %arg20, %arg21, %arg22, %arg23, %arg24, %arg25, %arg26) : (tensor<?x256x64xf32>, tensor<?x64xf32>, tensor<3x64x64xf32>, tensor<3x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<256x64xf32>, tensor<256xf32>, tensor<64x256xf32>, tensor<64xf32>, tensor<6x64x64xf32>, tensor<6x64xf32>) -> tensor<?x256x64xf32>
    %51 = sd.dot_general %48, %arg29 batch = [] x [] contract = [1] x [2] : (tensor<?x64xf32>, tensor<2x64x64xf32>) -> tensor<?x2x64xf32>
    %52 = sd.broadcast_in_dim %arg30 dims = [1, 2] : (tensor<2x64xf32>) -> tensor<?x2x64xf32>
    %53 = sd.add %51, %52 : tensor<?x2x64xf32>
    %54 = sd.slice %53 start = [0, 0, 0] limit = [-1, 1, 64] strides = [1, 1, 1] : (tensor<?x2x64xf32>) -> tensor<?x1x64xf32>
    %55 = sd.reshape %54 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %56 = sd.slice %53 start = [0, 1, 0] limit = [-1, 2, 64] strides = [1, 1, 1] : (tensor<?x2x64xf32>) -> tensor<?x1x64xf32>
    %57 = sd.reshape %56 : (tensor<?x1x64xf32>) -> tensor<?x64xf32>
    %58 = sd.layer_norm %50 : (tensor<?x256x64xf32>) -> tensor<?x256x64xf32>
    %59 = sd.broadcast_in_dim %57 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %60 = sd.broadcast_in_dim %55 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %61 = sd.mul %58, %59 : tensor<?x256x64xf32>
    %62 = sd.add %58, %61 : tensor<?x256x64xf32>
    %63 = sd.add %62, %60 : tensor<?x256x64xf32>
    %64 = sd.dot_general %63, %arg27 batch = [] x [] contract = [2] x [1] : (tensor<?x256x64xf32>, tensor<32x64xf32>) -> tensor<?x256x32xf32>
    %65 = sd.broadcast_in_dim %arg28 dims = [2] : (tensor<32xf32>) -> tensor<?x256x32xf32>
    %66 = sd.add %64, %65 : tensor<?x256x32xf32>
    %67 = sd.reshape %66 : (tensor<?x256x32xf32>) -> tensor<?x16x16x2x2x8xf32>
    %68 = sd.transpose %67 permutation = [0, 1, 3, 2, 4, 5] : (tensor<?x16x16x2x2x8xf32>) -> tensor<?x16x2x16x2x8xf32>
    %69 = sd.reshape %68 : (tensor<?x16x2x16x2x8xf32>) -> tensor<?x32x32x8xf32>
    %70 = sd.slice %69 start = [0, 0, 0, 0] limit = [-1, 32, 32, 4] strides = [1, 1, 1, 1] : (tensor<?x32x32x8xf32>) -> tensor<?x32x32x4xf32>
    %71 = sd.mse_loss %70, %0 : tensor<?x32x32x4xf32>
    return %71 : tensor<f32>
  }
}
