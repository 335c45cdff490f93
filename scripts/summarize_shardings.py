#!/usr/bin/env python3
"""Prints the mesh and a table of @loss's arguments with their shardings from
sdopt output: name (parameter name or input kind), type, sharding.

Usage: summarize_shardings.py FILE [MAX_PARAMS]
"""
import re
import sys

ARG = re.compile(
    r'%arg\d+: (tensor<[^>]*>) \{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}')
ROLE = re.compile(r'sd\.role = #sd\.(?:param<"([^"]*)"|input<(\w+)>)')
SHARDING = re.compile(r'sd\.sharding = #sd\.sharding<@\w+, (\[.*?\])>')


def main():
    text = open(sys.argv[1]).read()
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
    mesh = re.search(r'sd\.mesh @\w+ = <.*?>\n', text)
    if mesh:
        print('  ' + mesh.group(0).strip())
    loss = text[text.index('func.func @loss'):]
    signature = loss[:loss.index(') -> ')]
    rows = []
    for match in ARG.finditer(signature):
        role = ROLE.search(match.group(2))
        sharding = SHARDING.search(match.group(2))
        is_param = bool(role and role.group(1))
        name = (role.group(1) or role.group(2)) if role else '?'
        rows.append((is_param, name, match.group(1),
                     sharding.group(1) if sharding else '(none)'))
    params = [r[1:] for r in rows if r[0]]
    inputs = [r[1:] for r in rows if not r[0]]
    shown = params[:limit] + inputs
    width = max(len(r[0]) for r in shown)
    type_width = max(len(r[1]) for r in shown)
    for i, (name, ty, sharding) in enumerate(shown):
        if i == limit and len(params) > limit:
            print('  ... %d more parameters' % (len(params) - limit))
        print('  %-*s  %-*s  %s' % (width, name, type_width, ty, sharding))


if __name__ == '__main__':
    main()
