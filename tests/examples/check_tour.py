#!/usr/bin/env python3
"""The guided tour against its doc: runs examples/tour.cpp's program, or
its Python twin examples/tour.py, and compares what it prints with the
output blocks of docs/tour.md (each fenced block right after a line
`<!-- output of examples/tour.cpp -->`: both print the same lines), in
order, line for line; and the DOT it writes with the committed one. A
difference fails, showing both sides, so the doc cannot drift from the
code, nor one program from the other. With --excerpt FILE (README.md), each
fenced block after a line `<!-- excerpt of examples/tour.cpp -->` in FILE
must be a run of consecutive lines of the same output.

    check_tour.py TOUR_BINARY docs/tour.md docs/tour/abc_cost.dot WORKDIR [--excerpt README.md]
    check_tour.py --python PYTHON examples/tour.py docs/tour.md docs/tour/abc_cost.dot WORKDIR
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

MARK = "<!-- output of examples/tour.cpp -->"
EXCERPT_MARK = "<!-- excerpt of examples/tour.cpp -->"


def doc_blocks(text):
    blocks = re.findall(re.escape(MARK) + r"\n```[a-z]*\n(.*?)```", text, flags=re.S)
    if not blocks:
        sys.exit(f"no block after '{MARK}' in the doc")
    return "".join(blocks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="the interpreter to run PROGRAM with (examples/tour.py)")
    parser.add_argument("program", help="the tour: example_tour, or examples/tour.py with --python")
    parser.add_argument("doc")
    parser.add_argument("dot")
    parser.add_argument("work", help="a folder for the DOT the program writes")
    parser.add_argument("--excerpt", action="append", default=[],
                        help="a file whose excerpt blocks must be runs of the output's lines")
    args = parser.parse_args()
    program, doc, dot, work = args.program, args.doc, args.dot, args.work
    os.makedirs(work, exist_ok=True)
    written = os.path.join(work, "abc_cost.dot")
    if os.path.exists(written):
        os.remove(written)  # the program must write it again
    command = ([args.python] if args.python else []) + [program, work]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} exited with {run.returncode}:\n{run.stdout}{run.stderr}")
    if not os.path.exists(written):
        sys.exit(f"{' '.join(command)} wrote no {written}")
    with open(doc) as f:
        expected = doc_blocks(f.read())
    failed = False
    for name, want, got in [(doc, expected, run.stdout),
                            (dot, open(dot).read(), open(written).read())]:
        if want != got:
            failed = True
            print(f"{name} differs from what {program} printed (- doc, + program):")
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True)))
    output = run.stdout.splitlines()
    for name in args.excerpt:
        with open(name) as f:
            excerpts = re.findall(re.escape(EXCERPT_MARK) + r"\n```[a-z]*\n(.*?)```", f.read(), flags=re.S)
        if not excerpts:
            failed = True
            print(f"{name}: no block after '{EXCERPT_MARK}'")
        for excerpt in excerpts:
            want = excerpt.splitlines()
            if not any(output[i:i + len(want)] == want for i in range(len(output) - len(want) + 1)):
                failed = True
                print(f"{name}: this excerpt is not a run of lines that {program} printed:")
                sys.stdout.writelines(line + "\n" for line in want)
    if failed:
        sys.exit(1)
    print(f"{program}: the tour's {len(expected.splitlines())} lines of output and its DOT match {doc}")


if __name__ == "__main__":
    main()
