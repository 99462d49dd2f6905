#!/usr/bin/python3
# Run by scripts/browser/test.sh: PAGE-DIR WEB: the page's files lint (index.html's elements
# close) and the service at WEB serves them byte for byte.
import sys, urllib.request
from html.parser import HTMLParser
files, web = sys.argv[1:]
VOID = {"meta", "link", "input", "br", "img", "hr", "source", "track", "wbr", "area", "base", "col", "embed"}
class Check(HTMLParser):
    def __init__(self):
        super().__init__(); self.open = []; self.problems = []
    def handle_starttag(self, tag, attrs):
        if tag not in VOID: self.open.append((tag, self.getpos()[0]))
    def handle_endtag(self, tag):
        if not self.open or self.open[-1][0] != tag:
            self.problems.append(f"line {self.getpos()[0]}: </{tag}> closes {self.open[-1] if self.open else 'nothing'}")
        else: self.open.pop()
check = Check(); check.feed(open(f"{files}/index.html").read()); check.close()
problems = check.problems + [f"<{t}> of line {l} never closed" for t, l in check.open]
for path, name in (("/", "index.html"), ("/app.js", "app.js")):
    try:
        served = urllib.request.urlopen(web + path, timeout=10).read()
    except OSError as error:
        problems.append(f"{path}: {error}"); continue
    if served != open(f"{files}/{name}", "rb").read(): problems.append(f"{path} is not {files}/{name} ({len(served)} bytes served)")
print("browser: page files: " + ("; ".join(problems) if problems else "index.html well formed, app.js parses, both served as they are in the tree"))
sys.exit(1 if problems else 0)
