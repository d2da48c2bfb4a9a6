#!/usr/bin/env python3
"""The guided tour against its doc: runs examples/tour.cpp's program and
compares what it prints with the output blocks of docs/tour.md (each
fenced block right after a line `<!-- output of examples/tour.cpp -->`),
in order, line for line; and the DOT it writes with the committed one.
A difference fails, showing both sides, so the doc cannot drift from the
code.

    check_tour.py TOUR_BINARY docs/tour.md docs/tour/abc_cost.dot WORKDIR
"""
import difflib
import os
import re
import subprocess
import sys

MARK = "<!-- output of examples/tour.cpp -->"


def doc_blocks(text):
    blocks = re.findall(re.escape(MARK) + r"\n```[a-z]*\n(.*?)```", text, flags=re.S)
    if not blocks:
        sys.exit(f"no block after '{MARK}' in the doc")
    return "".join(blocks)


def main():
    binary, doc, dot, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    written = os.path.join(work, "abc_cost.dot")
    if os.path.exists(written):
        os.remove(written)  # the program must write it again
    run = subprocess.run([binary, work], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{binary} exited with {run.returncode}:\n{run.stdout}{run.stderr}")
    with open(doc) as f:
        expected = doc_blocks(f.read())
    failed = False
    for name, want, got in [(doc, expected, run.stdout),
                            (dot, open(dot).read(), open(written).read())]:
        if want != got:
            failed = True
            print(f"{name} differs from what the tour printed (- doc, + program):")
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True)))
    if failed:
        sys.exit(1)
    print(f"the tour's {len(expected.splitlines())} lines of output and its DOT match {doc}")


if __name__ == "__main__":
    main()
