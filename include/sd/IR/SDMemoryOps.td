//===- SDMemoryOps.td - moves between device and host memory -*- tablegen -*-===//
//
// Offload: a value the backward pass needs moves to host memory after the
// forward pass computes it and comes back before the backward pass uses it
// (remat policies OFFLOAD_MATMUL_WITHOUT_BATCH, HIDDEN_STATE_WITH_OFFLOAD,
// CUSTOM). The moves are ops so that the cost model counts host bytes and
// transfers, and the runtime executes them between its memory pools.
// Included from SDOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDMEMORYOPS_TD
#define SD_IR_SDMEMORYOPS_TD

include "sd/IR/SDOps.td"

class SD_MemoryMoveOp<string mnemonic, string what>
    : SD_SameTypeOp<mnemonic, [SameOperandsAndResultType,
                               SD_ElementwiseShardingRule]> {
  let summary = "Moves a tensor " # what;
  let arguments = (ins SD_FloatTensor:$operand);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def SD_OffloadOp : SD_MemoryMoveOp<"offload", "from device to host memory"> {
  let description = [{
    ```mlir
    %h = sd.offload %x : tensor<8x256x384xf32>
    ```
    The result is the same tensor held in host memory: the device copy
    may be freed once the offload is done. Only `sd.reload` and function
    returns use the result. Its sharding is its operand's: each device
    offloads its own block. All stages.
  }];
}

def SD_ReloadOp : SD_MemoryMoveOp<"reload", "from host back to device memory"> {
  let description = [{
    ```mlir
    %y = sd.reload %h : tensor<8x256x384xf32>
    ```
    Brings an offloaded tensor back into device memory. All stages.

    Constraints:
    * the operand is the result of `sd.offload`
  }];
  let hasVerifier = 1;
}

#endif // SD_IR_SDMEMORYOPS_TD
