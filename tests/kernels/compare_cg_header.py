#!/usr/bin/env python3
"""Compares a regenerated cg_tables.hpp with the checked-in one: the text must be identical once the floating-point
literals are masked, and every literal must agree to 1e-13 (absolute; CG entries are <= 1). Different numpy/LAPACK
builds (e.g. the GPU machine's) round the last digit differently, so a byte comparison would fail for no reason.

usage: compare_cg_header.py NEW.hpp CHECKED_IN.hpp
"""
import re
import sys

FLOAT = re.compile(r"-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+")


def split(path):
    text = open(path).read()
    return FLOAT.sub("#", text), [float(x) for x in FLOAT.findall(text)]


def main():
    new_text, new_vals = split(sys.argv[1])
    old_text, old_vals = split(sys.argv[2])
    if new_text != old_text:
        for i, (a, b) in enumerate(zip(new_text.splitlines(), old_text.splitlines())):
            if a != b:
                print(f"structure differs at line {i + 1}:\n  new: {a}\n  old: {b}")
                break
        else:
            print("structure differs (line count)")
        return 1
    worst = max((abs(a - b) for a, b in zip(new_vals, old_vals)), default=0.0)
    print(f"{len(new_vals)} coefficients, largest difference {worst:.3g}")
    return 0 if worst <= 1e-13 else 1


if __name__ == "__main__":
    sys.exit(main())
