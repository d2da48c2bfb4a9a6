#!/usr/bin/env python3
"""The closing lines of scripts/test.sh: for every label of the suite, how
many tests ran, passed, failed and skipped, and each label that ran nothing
on this machine named with the reason (a skip's message, or WHY given for
the label), so that nothing is left out without a word.

    scripts/test_summary.py BUILD JUNIT_XML [--why LABEL=TEXT ...] [--note LABEL=TEXT ...] [--only LABEL ...]

JUNIT_XML is ctest's --output-junit file; the labels come from
`ctest --show-only=json-v1`."""
import argparse
import collections
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

LABELS = ["unit", "slow", "mpi", "cuda", "torch", "package", "python"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build")
    parser.add_argument("junit")
    parser.add_argument("--why", action="append", default=[], help="LABEL=why it has no tests here")
    parser.add_argument("--note", action="append", default=[], help="LABEL=text added to the label's line")
    parser.add_argument("--only", action="append", default=[], help="summarise only these labels")
    args = parser.parse_args()
    why = dict(item.split("=", 1) for item in args.why)
    note = dict(item.split("=", 1) for item in args.note)

    listing = json.loads(subprocess.run(["ctest", "--test-dir", args.build, "--show-only=json-v1"], check=True,
                                        capture_output=True, text=True).stdout)
    labels_of = {}
    for test in listing["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labels_of[test["name"]] = props.get("LABELS", [])

    outcome, message = {}, {}
    for case in ET.parse(args.junit).getroot().iter("testcase"):
        name = case.get("name")
        skipped, failed = case.find("skipped"), case.find("failure")
        if skipped is not None or case.get("status") in ("notrun", "disabled"):
            outcome[name] = "skipped"
            message[name] = (skipped.get("message") if skipped is not None else "") or ""
            out = case.find("system-out")
            if out is not None and out.text:  # GoogleTest: the line after "file:line: Skipped" says why
                lines = out.text.splitlines()
                said = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line.endswith(": Skipped")]
                plain = [line for line in lines if line.strip() and not line.startswith("[")]
                message[name] = (said or plain[-1:] or [message[name]])[0].strip()[:160]
        elif failed is not None or case.get("status") == "fail":
            outcome[name] = "failed"
        else:
            outcome[name] = "passed"

    counts = collections.defaultdict(collections.Counter)
    reasons = collections.defaultdict(collections.Counter)
    for name, labels in labels_of.items():
        for label in labels or ["(none)"]:
            counts[label][outcome.get(name, "not run")] += 1
            if outcome.get(name) == "skipped":
                reasons[label][message.get(name, "")] += 1

    print("tests by label:")
    for label in args.only or LABELS + sorted(set(counts) - set(LABELS)):
        c = counts.get(label, collections.Counter())
        total = sum(c.values())
        line = f"  {label:8} {total:4} tests: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
        if c["not run"]:
            line += f", {c['not run']} not run"
        if total == 0:
            line = f"  {label:8}    0 tests: NOT RUN here: {why.get(label, 'no test of this label was configured')}"
        elif c["skipped"]:
            reason = "; ".join(f"{text} ({count})" for text, count in reasons[label].most_common(3))
            line += f" -- {'NOT RUN here' if c['skipped'] == total else 'skipped'}: {reason}"
        if label in note:
            line += f" ({note[label]})"
        print(line)
    failed = sum(counts[label]["failed"] for label in (args.only or counts))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
