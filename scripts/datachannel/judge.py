#!/usr/bin/python3
# Run by scripts/datachannel/test.sh: judge NAME PYTHON-EXPRESSION FILES...: the case passes when
# the expression over the JSON lines of FILES (j[0], j[1], ...) is true.
import json, sys
name, expression, files = sys.argv[1], sys.argv[2], sys.argv[3:]
j = []
for f in files:
    found = [l for l in open(f).read().splitlines() if l.startswith("{")]
    j.append(json.loads(found[-1]) if found else {})
ok = eval(expression)
print(f"datachannel: {name}: {'passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
