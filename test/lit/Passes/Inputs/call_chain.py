"""Prints an sd program whose @loss calls @f0, @f0 calls @f1, ... and the
last function, @f<N-1>, applies sd.exp: a call chain N functions deep.

  call_chain.py N
"""
import sys

n = int(sys.argv[1])
t = "tensor<?x4xf32>"
print(f"func.func @loss(%x: {t}) -> {t} attributes {{sd.default_batch = 2 : i64}} {{")
print(f"  %y = func.call @f0(%x) : ({t}) -> {t}")
print(f"  return %y : {t}\n}}")
for i in range(n):
    body = (f"func.call @f{i + 1}(%x) : ({t}) -> {t}" if i + 1 < n
            else f"sd.exp %x : {t}")
    print(f"func.func @f{i}(%x: {t}) -> {t} {{\n  %y = {body}\n  return %y : {t}\n}}")
