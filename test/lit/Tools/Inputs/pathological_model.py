#!/usr/bin/env python3
"""Writes sd programs whose size is one number, for the tests that a large
program costs linear time in sdopt and sdrun.

  pathological_model.py calls N   @loss calls @f0, which calls @f1, ...,
                                  @f{N-1}: a chain of N calls, each callee
                                  one sd.tanh and the next call
  pathological_model.py args N    @loss with N parameters, tensor<4xf32>
                                  each, summed into the prediction
"""
import sys


def header(params):
    """The signature of @loss: `params`, then the latents and the noise."""
    args = params + [
        "%x: tensor<?x4xf32> {sd.role = #sd.input<latents>, "
        "sd.logical_axes = #sd.logical_axes<[batch, embed]>}",
        "%t: tensor<?x4xf32> {sd.role = #sd.input<noise>, "
        "sd.logical_axes = #sd.logical_axes<[batch, embed]>}",
    ]
    return ("func.func @loss(" + ",\n    ".join(args) +
            ") -> tensor<f32> attributes {sd.default_batch = 2 : i64} {")


def param(i):
    return (f'%p{i}: tensor<4xf32> {{sd.role = #sd.param<"p{i}", zeros>, '
            f"sd.logical_axes = #sd.logical_axes<[embed]>}}")


def calls(n, out):
    out.write(header([param(0)]) + "\n")
    out.write("  %b = sd.broadcast_in_dim %p0 dims = [1] : "
              "(tensor<4xf32>) -> tensor<?x4xf32>\n")
    out.write("  %h = sd.add %x, %b : tensor<?x4xf32>\n")
    out.write("  %y = call @f0(%h) : (tensor<?x4xf32>) -> tensor<?x4xf32>\n")
    out.write("  %l = sd.mse_loss %y, %t : tensor<?x4xf32>\n")
    out.write("  return %l : tensor<f32>\n}\n")
    for i in range(n):
        out.write(f"func.func private @f{i}(%a: tensor<?x4xf32>) -> "
                  "tensor<?x4xf32> {\n")
        out.write("  %r = sd.tanh %a : tensor<?x4xf32>\n")
        if i + 1 < n:
            out.write(f"  %c = call @f{i + 1}(%r) : (tensor<?x4xf32>) -> "
                      "tensor<?x4xf32>\n")
            out.write("  return %c : tensor<?x4xf32>\n}\n")
        else:
            out.write("  return %r : tensor<?x4xf32>\n}\n")


def args(n, out):
    out.write(header([param(i) for i in range(n)]) + "\n")
    out.write("  %s0 = sd.add %p0, %p0 : tensor<4xf32>\n")
    for i in range(1, n):
        out.write(f"  %s{i} = sd.add %s{i - 1}, %p{i} : tensor<4xf32>\n")
    out.write(f"  %b = sd.broadcast_in_dim %s{n - 1} dims = [1] : "
              "(tensor<4xf32>) -> tensor<?x4xf32>\n")
    out.write("  %y = sd.add %x, %b : tensor<?x4xf32>\n")
    out.write("  %l = sd.mse_loss %y, %t : tensor<?x4xf32>\n")
    out.write("  return %l : tensor<f32>\n}\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("calls", "args"):
        sys.exit(__doc__)
    {"calls": calls, "args": args}[sys.argv[1]](int(sys.argv[2]), sys.stdout)
