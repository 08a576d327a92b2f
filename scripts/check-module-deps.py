#!/usr/bin/env python3
"""Fails when a source file includes a module that DESIGN.md's module table does not allow.

The table's rows are `| module | owns | may depend on |`; a file in src/A/ may include "B/..."
only when B is A or is listed for A. Modules present in src/ but missing from the table fail
too, so the table always states every real edge. Usage: check-module-deps.py [REPO_ROOT]"""

import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
design = os.path.join(root, "DESIGN.md")
src = os.path.join(root, "src")

allowed = {}
in_table = False
with open(design) as f:
    for line in f:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| module | owns | may depend on |"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            if set(cells[0]) <= set("-"):
                continue
            deps = set(re.findall(r"[a-z_]+", cells[2].split("(")[0])) if len(cells) > 2 else set()
            allowed[cells[0]] = deps
if not allowed:
    sys.exit("check-module-deps: no module table found in %s" % design)

include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
bad = []
for module in sorted(os.listdir(src)):
    path = os.path.join(src, module)
    if not os.path.isdir(path):
        continue
    if module not in allowed:
        bad.append("src/%s: module missing from DESIGN.md's module table" % module)
        continue
    for name in sorted(os.listdir(path)):
        if not name.endswith((".c", ".h")):
            continue
        with open(os.path.join(path, name)) as f:
            for n, line in enumerate(f, 1):
                m = include.match(line)
                if m and m.group(1) != module and m.group(1) not in allowed[module]:
                    bad.append("src/%s/%s:%d: includes %s/, which DESIGN.md does not allow "
                               "for %s (allowed: %s)" % (module, name, n, m.group(1), module,
                                                         ", ".join(sorted(allowed[module])) or "none"))
for b in bad:
    print(b)
if bad:
    sys.exit(1)
print("module dependencies: %d modules, every include allowed by DESIGN.md" % len(allowed))
