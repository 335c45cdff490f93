// sdgen --preset=dit-tiny
module {
  func.func private @dit_block(%arg0: tensor<?x256x64xf32>, %arg1: tensor<?x64xf32>, %arg2: tensor<64x192xf32>, %arg3: tensor<192xf32>, %arg4: tensor<64x64xf32>, %arg5: tensor<64xf32>, %arg6: tensor<64x256xf32>, %arg7: tensor<256xf32>, %arg8: tensor<256x64xf32>, %arg9: tensor<64xf32>, %arg10: tensor<64x384xf32>, %arg11: tensor<384xf32>) -> tensor<?x256x64xf32> {
    %0 = sd.silu %arg1 : tensor<?x64xf32>
    %1 = sd.slice %arg10 start = [0, 0] limit = [64, 64] strides = [1, 1] : (tensor<64x384xf32>) -> tensor<64x64xf32>
    %2 = sd.slice %arg11 start = [0] limit = [64] strides = [1] : (tensor<384xf32>) -> tensor<64xf32>
    %3 = sd.dot_general %0, %1 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %4 = sd.broadcast_in_dim %2 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %5 = sd.add %3, %4 : tensor<?x64xf32>
    %6 = sd.slice %arg10 start = [0, 64] limit = [64, 128] strides = [1, 1] : (tensor<64x384xf32>) -> tensor<64x64xf32>
    %7 = sd.slice %arg11 start = [64] limit = [128] strides = [1] : (tensor<384xf32>) -> tensor<64xf32>
    %8 = sd.dot_general %0, %6 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %9 = sd.broadcast_in_dim %7 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %10 = sd.add %8, %9 : tensor<?x64xf32>
    %11 = sd.slice %arg10 start = [0, 128] limit = [64, 192] strides = [1, 1] : (tensor<64x384xf32>) -> tensor<64x64xf32>
    %12 = sd.slice %arg11 start = [128] limit = [192] strides = [1] : (tensor<384xf32>) -> tensor<64xf32>
    %13 = sd.dot_general %0, %11 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %14 = sd.broadcast_in_dim %12 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %15 = sd.add %13, %14 : tensor<?x64xf32>
    %16 = sd.slice %arg10 start = [0, 192] limit = [64, 256] strides = [1, 1] : (tensor<64x384xf32>) -> tensor<64x64xf32>
    %17 = sd.slice %arg11 start = [192] limit = [256] strides = [1] : (tensor<384xf32>) -> tensor<64xf32>
    %18 = sd.dot_general %0, %16 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %19 = sd.broadcast_in_dim %17 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %20 = sd.add %18, %19 : tensor<?x64xf32>
    %21 = sd.slice %arg10 start = [0, 256] limit = [64, 320] strides = [1, 1] : (tensor<64x384xf32>) -> tensor<64x64xf32>
    %22 = sd.slice %arg11 start = [256] limit = [320] strides = [1] : (tensor<384xf32>) -> tensor<64xf32>
    %23 = sd.dot_general %0, %21 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %24 = sd.broadcast_in_dim %22 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %25 = sd.add %23, %24 : tensor<?x64xf32>
    %26 = sd.slice %arg10 start = [0, 320] limit = [64, 384] strides = [1, 1] : (tensor<64x384xf32>) -> tensor<64x64xf32>
    %27 = sd.slice %arg11 start = [320] limit = [384] strides = [1] : (tensor<384xf32>) -> tensor<64xf32>
    %28 = sd.dot_general %0, %26 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %29 = sd.broadcast_in_dim %27 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %30 = sd.add %28, %29 : tensor<?x64xf32>
    %31 = sd.layer_norm %arg0 : (tensor<?x256x64xf32>) -> tensor<?x256x64xf32>
    %32 = sd.broadcast_in_dim %10 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %33 = sd.broadcast_in_dim %5 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %34 = sd.mul %31, %32 : tensor<?x256x64xf32>
    %35 = sd.add %31, %34 : tensor<?x256x64xf32>
    %36 = sd.add %35, %33 : tensor<?x256x64xf32>
    %37 = sd.slice %arg2 start = [0, 0] limit = [64, 64] strides = [1, 1] : (tensor<64x192xf32>) -> tensor<64x64xf32>
    %38 = sd.slice %arg3 start = [0] limit = [64] strides = [1] : (tensor<192xf32>) -> tensor<64xf32>
    %39 = sd.dot_general %36, %37 batch = [] x [] contract = [2] x [0] : (tensor<?x256x64xf32>, tensor<64x64xf32>) -> tensor<?x256x64xf32>
    %40 = sd.broadcast_in_dim %38 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %41 = sd.add %39, %40 {sd.name = "query_proj"} : tensor<?x256x64xf32>
    %42 = sd.slice %arg2 start = [0, 64] limit = [64, 128] strides = [1, 1] : (tensor<64x192xf32>) -> tensor<64x64xf32>
    %43 = sd.slice %arg3 start = [64] limit = [128] strides = [1] : (tensor<192xf32>) -> tensor<64xf32>
    %44 = sd.dot_general %36, %42 batch = [] x [] contract = [2] x [0] : (tensor<?x256x64xf32>, tensor<64x64xf32>) -> tensor<?x256x64xf32>
    %45 = sd.broadcast_in_dim %43 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %46 = sd.add %44, %45 {sd.name = "key_proj"} : tensor<?x256x64xf32>
    %47 = sd.slice %arg2 start = [0, 128] limit = [64, 192] strides = [1, 1] : (tensor<64x192xf32>) -> tensor<64x64xf32>
    %48 = sd.slice %arg3 start = [128] limit = [192] strides = [1] : (tensor<192xf32>) -> tensor<64xf32>
    %49 = sd.dot_general %36, %47 batch = [] x [] contract = [2] x [0] : (tensor<?x256x64xf32>, tensor<64x64xf32>) -> tensor<?x256x64xf32>
    %50 = sd.broadcast_in_dim %48 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %51 = sd.add %49, %50 {sd.name = "value_proj"} : tensor<?x256x64xf32>
    %52 = sd.reshape %41 : (tensor<?x256x64xf32>) -> tensor<?x256x4x16xf32>
    %53 = sd.transpose %52 permutation = [0, 2, 1, 3] {sd.name = "xq_out"} : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
    %54 = sd.reshape %46 : (tensor<?x256x64xf32>) -> tensor<?x256x4x16xf32>
    %55 = sd.transpose %54 permutation = [0, 2, 1, 3] {sd.name = "xk_out"} : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
    %56 = sd.reshape %51 : (tensor<?x256x64xf32>) -> tensor<?x256x4x16xf32>
    %57 = sd.transpose %56 permutation = [0, 2, 1, 3] : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
    %58 = sd.attention %53, %55, %57 : (tensor<?x4x256x16xf32>, tensor<?x4x256x16xf32>, tensor<?x4x256x16xf32>) -> tensor<?x4x256x16xf32>
    %59 = sd.transpose %58 permutation = [0, 2, 1, 3] : (tensor<?x4x256x16xf32>) -> tensor<?x256x4x16xf32>
    %60 = sd.reshape %59 {sd.name = "attn_output"} : (tensor<?x256x4x16xf32>) -> tensor<?x256x64xf32>
    %61 = sd.dot_general %60, %arg4 batch = [] x [] contract = [2] x [0] : (tensor<?x256x64xf32>, tensor<64x64xf32>) -> tensor<?x256x64xf32>
    %62 = sd.broadcast_in_dim %arg5 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %63 = sd.add %61, %62 : tensor<?x256x64xf32>
    %64 = sd.broadcast_in_dim %15 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %65 = sd.mul %64, %63 : tensor<?x256x64xf32>
    %66 = sd.add %arg0, %65 : tensor<?x256x64xf32>
    %67 = sd.layer_norm %66 : (tensor<?x256x64xf32>) -> tensor<?x256x64xf32>
    %68 = sd.broadcast_in_dim %25 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %69 = sd.broadcast_in_dim %20 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %70 = sd.mul %67, %68 : tensor<?x256x64xf32>
    %71 = sd.add %67, %70 : tensor<?x256x64xf32>
    %72 = sd.add %71, %69 : tensor<?x256x64xf32>
    %73 = sd.dot_general %72, %arg6 batch = [] x [] contract = [2] x [0] : (tensor<?x256x64xf32>, tensor<64x256xf32>) -> tensor<?x256x256xf32>
    %74 = sd.broadcast_in_dim %arg7 dims = [2] : (tensor<256xf32>) -> tensor<?x256x256xf32>
    %75 = sd.add %73, %74 : tensor<?x256x256xf32>
    %76 = sd.gelu %75 {sd.name = "ffn_activation"} : tensor<?x256x256xf32>
    %77 = sd.dot_general %76, %arg8 batch = [] x [] contract = [2] x [0] : (tensor<?x256x256xf32>, tensor<256x64xf32>) -> tensor<?x256x64xf32>
    %78 = sd.broadcast_in_dim %arg9 dims = [2] : (tensor<64xf32>) -> tensor<?x256x64xf32>
    %79 = sd.add %77, %78 : tensor<?x256x64xf32>
    %80 = sd.broadcast_in_dim %30 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %81 = sd.mul %80, %79 : tensor<?x256x64xf32>
    %82 = sd.add %66, %81 {sd.name = "hidden_states"} : tensor<?x256x64xf32>
    return %82 : tensor<?x256x64xf32>
  }
  func.func @loss(%arg0: tensor<16x64xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform>}, %arg1: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"x_embedder.proj.bias", zeros>}, %arg2: tensor<256x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"t_embedder.mlp.0.weight", normal(0.02)>}, %arg3: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"t_embedder.mlp.0.bias", zeros>}, %arg4: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"t_embedder.mlp.2.weight", normal(0.02)>}, %arg5: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"t_embedder.mlp.2.bias", zeros>}, %arg6: tensor<1001x64xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}, %arg7: tensor<64x192xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.weight", xavier_uniform>}, %arg8: tensor<192xf32> {sd.logical_axes = #sd.logical_axes<[heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.bias", zeros>}, %arg9: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[heads, embed]>, sd.role = #sd.param<"blocks.0.attn.proj.weight", xavier_uniform>}, %arg10: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.attn.proj.bias", zeros>}, %arg11: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc1.weight", xavier_uniform>}, %arg12: tensor<256xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc1.bias", zeros>}, %arg13: tensor<256x64xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.mlp.fc2.weight", xavier_uniform>}, %arg14: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.0.mlp.fc2.bias", zeros>}, %arg15: tensor<64x384xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.weight", zeros>}, %arg16: tensor<384xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.0.adaLN_modulation.1.bias", zeros>}, %arg17: tensor<64x192xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.1.attn.qkv.weight", xavier_uniform>}, %arg18: tensor<192xf32> {sd.logical_axes = #sd.logical_axes<[heads]>, sd.role = #sd.param<"blocks.1.attn.qkv.bias", zeros>}, %arg19: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[heads, embed]>, sd.role = #sd.param<"blocks.1.attn.proj.weight", xavier_uniform>}, %arg20: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.attn.proj.bias", zeros>}, %arg21: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc1.weight", xavier_uniform>}, %arg22: tensor<256xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.1.mlp.fc1.bias", zeros>}, %arg23: tensor<256x64xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.1.mlp.fc2.weight", xavier_uniform>}, %arg24: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"blocks.1.mlp.fc2.bias", zeros>}, %arg25: tensor<64x384xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.weight", zeros>}, %arg26: tensor<384xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.bias", zeros>}, %arg27: tensor<64x32xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}, %arg28: tensor<32xf32> {sd.logical_axes = #sd.logical_axes<[_]>, sd.role = #sd.param<"final_layer.linear.bias", zeros>}, %arg29: tensor<64x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.weight", zeros>}, %arg30: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.bias", zeros>}, %arg31: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %arg32: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}, %arg33: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %arg34: tensor<?x1001xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}) -> tensor<f32> attributes {sd.default_batch = 8 : i64} {
    %0 = sd.sub %arg32, %arg31 : tensor<?x32x32x4xf32>
    %1 = sd.broadcast_in_dim %arg33 dims = [0] : (tensor<?xf32>) -> tensor<?x32x32x4xf32>
    %2 = sd.mul %1, %0 : tensor<?x32x32x4xf32>
    %3 = sd.add %arg31, %2 : tensor<?x32x32x4xf32>
    %4 = sd.reshape %3 : (tensor<?x32x32x4xf32>) -> tensor<?x16x2x16x2x4xf32>
    %5 = sd.transpose %4 permutation = [0, 1, 3, 5, 2, 4] : (tensor<?x16x2x16x2x4xf32>) -> tensor<?x16x16x4x2x2xf32>
    %6 = sd.reshape %5 : (tensor<?x16x16x4x2x2xf32>) -> tensor<?x256x16xf32>
    %7 = sd.iota dim = 0 : tensor<16xf32>
    %8 = sd.constant dense<-0.575646281> : tensor<16xf32>
    %9 = sd.mul %7, %8 : tensor<16xf32>
    %10 = sd.exp %9 : tensor<16xf32>
    %11 = sd.broadcast_in_dim %10 dims = [2] : (tensor<16xf32>) -> tensor<16x16x16xf32>
    %12 = sd.iota dim = 1 : tensor<16x16x16xf32>
    %13 = sd.mul %12, %11 : tensor<16x16x16xf32>
    %14 = sd.iota dim = 0 : tensor<16x16x16xf32>
    %15 = sd.mul %14, %11 : tensor<16x16x16xf32>
    %16 = sd.sin %13 : tensor<16x16x16xf32>
    %17 = sd.cos %13 : tensor<16x16x16xf32>
    %18 = sd.sin %15 : tensor<16x16x16xf32>
    %19 = sd.cos %15 : tensor<16x16x16xf32>
    %20 = sd.concat %16, %17, %18, %19 dim = 2 : (tensor<16x16x16xf32>, tensor<16x16x16xf32>, tensor<16x16x16xf32>, tensor<16x16x16xf32>) -> tensor<16x16x64xf32>
    %21 = sd.reshape %20 : (tensor<16x16x64xf32>) -> tensor<256x64xf32>
    %22 = sd.broadcast_in_dim %arg1 dims = [1] : (tensor<64xf32>) -> tensor<256x64xf32>
    %23 = sd.add %22, %21 : tensor<256x64xf32>
    %24 = sd.dot_general %6, %arg0 batch = [] x [] contract = [2] x [0] : (tensor<?x256x16xf32>, tensor<16x64xf32>) -> tensor<?x256x64xf32>
    %25 = sd.broadcast_in_dim %23 dims = [1, 2] : (tensor<256x64xf32>) -> tensor<?x256x64xf32>
    %26 = sd.add %24, %25 : tensor<?x256x64xf32>
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
    %39 = sd.dot_general %38, %arg2 batch = [] x [] contract = [1] x [0] : (tensor<?x256xf32>, tensor<256x64xf32>) -> tensor<?x64xf32>
    %40 = sd.broadcast_in_dim %arg3 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %41 = sd.add %39, %40 : tensor<?x64xf32>
    %42 = sd.silu %41 : tensor<?x64xf32>
    %43 = sd.dot_general %42, %arg4 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %44 = sd.broadcast_in_dim %arg5 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %45 = sd.add %43, %44 : tensor<?x64xf32>
    %46 = sd.dot_general %arg34, %arg6 batch = [] x [] contract = [1] x [0] : (tensor<?x1001xf32>, tensor<1001x64xf32>) -> tensor<?x64xf32>
    %47 = sd.add %45, %46 : tensor<?x64xf32>
    %48 = call @dit_block(%26, %47, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14, %arg15, %arg16) : (tensor<?x256x64xf32>, tensor<?x64xf32>, tensor<64x192xf32>, tensor<192xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>, tensor<64x384xf32>, tensor<384xf32>) -> tensor<?x256x64xf32>
    %49 = call @dit_block(%48, %47, %arg17, %arg18, %arg19, %arg20, %arg21, %arg22, %arg23, %arg24, %arg25, %arg26) : (tensor<?x256x64xf32>, tensor<?x64xf32>, tensor<64x192xf32>, tensor<192xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>, tensor<64x384xf32>, tensor<384xf32>) -> tensor<?x256x64xf32>
    %50 = sd.silu %47 : tensor<?x64xf32>
    %51 = sd.slice %arg29 start = [0, 0] limit = [64, 64] strides = [1, 1] : (tensor<64x128xf32>) -> tensor<64x64xf32>
    %52 = sd.slice %arg30 start = [0] limit = [64] strides = [1] : (tensor<128xf32>) -> tensor<64xf32>
    %53 = sd.dot_general %50, %51 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %54 = sd.broadcast_in_dim %52 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %55 = sd.add %53, %54 : tensor<?x64xf32>
    %56 = sd.slice %arg29 start = [0, 64] limit = [64, 128] strides = [1, 1] : (tensor<64x128xf32>) -> tensor<64x64xf32>
    %57 = sd.slice %arg30 start = [64] limit = [128] strides = [1] : (tensor<128xf32>) -> tensor<64xf32>
    %58 = sd.dot_general %50, %56 batch = [] x [] contract = [1] x [0] : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
    %59 = sd.broadcast_in_dim %57 dims = [1] : (tensor<64xf32>) -> tensor<?x64xf32>
    %60 = sd.add %58, %59 : tensor<?x64xf32>
    %61 = sd.layer_norm %49 : (tensor<?x256x64xf32>) -> tensor<?x256x64xf32>
    %62 = sd.broadcast_in_dim %60 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %63 = sd.broadcast_in_dim %55 dims = [0, 2] : (tensor<?x64xf32>) -> tensor<?x256x64xf32>
    %64 = sd.mul %61, %62 : tensor<?x256x64xf32>
    %65 = sd.add %61, %64 : tensor<?x256x64xf32>
    %66 = sd.add %65, %63 : tensor<?x256x64xf32>
    %67 = sd.reshape %arg27 : (tensor<64x32xf32>) -> tensor<64x4x8xf32>
    %68 = sd.slice %67 start = [0, 0, 0] limit = [64, 4, 4] strides = [1, 1, 1] : (tensor<64x4x8xf32>) -> tensor<64x4x4xf32>
    %69 = sd.reshape %68 : (tensor<64x4x4xf32>) -> tensor<64x16xf32>
    %70 = sd.reshape %arg28 : (tensor<32xf32>) -> tensor<4x8xf32>
    %71 = sd.slice %70 start = [0, 0] limit = [4, 4] strides = [1, 1] : (tensor<4x8xf32>) -> tensor<4x4xf32>
    %72 = sd.reshape %71 : (tensor<4x4xf32>) -> tensor<16xf32>
    %73 = sd.dot_general %66, %69 batch = [] x [] contract = [2] x [0] : (tensor<?x256x64xf32>, tensor<64x16xf32>) -> tensor<?x256x16xf32>
    %74 = sd.broadcast_in_dim %72 dims = [2] : (tensor<16xf32>) -> tensor<?x256x16xf32>
    %75 = sd.add %73, %74 : tensor<?x256x16xf32>
    %76 = sd.reshape %75 : (tensor<?x256x16xf32>) -> tensor<?x16x16x2x2x4xf32>
    %77 = sd.transpose %76 permutation = [0, 1, 3, 2, 4, 5] : (tensor<?x16x16x2x2x4xf32>) -> tensor<?x16x2x16x2x4xf32>
    %78 = sd.reshape %77 : (tensor<?x16x2x16x2x4xf32>) -> tensor<?x32x32x4xf32>
    %79 = sd.mse_loss %78, %0 : tensor<?x32x32x4xf32>
    return %79 : tensor<f32>
  }
}
