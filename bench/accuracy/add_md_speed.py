#!/usr/bin/env python3
"""Adds a model's measured MD speed on the H200 to its model card, under md_h200.

  bench/accuracy/add_md_speed.py CARD.json MD_SPEEDS.json MODEL_NAME [--note TEXT]

MD_SPEEDS.json: bench/accuracy/results/water_potentials_md_h200.json (per model steps_per_second_648, its runs and,
where measured, steps_per_second_10368; a provenance per model or for the whole file). The card keeps everything else as python -m batmobile.evaluate wrote it.
"""
import argparse
import json


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("card")
    p.add_argument("speeds")
    p.add_argument("model")
    p.add_argument("--note", default=None, help="free text stored as the card's notes")
    a = p.parse_args(argv)
    speeds = json.load(open(a.speeds))
    if a.model not in speeds["models"]:
        raise SystemExit(f"{a.speeds} has no model {a.model!r}; it has {sorted(speeds['models'])}")
    card = json.load(open(a.card))
    entry = speeds["models"][a.model]
    provenance = entry.get("provenance", speeds.get("provenance"))  # the model's own run, else the file's
    if not provenance:
        raise SystemExit(f"{a.speeds}: no provenance (commit, machine, command) for model {a.model!r}")
    card["md_h200"] = dict(entry, what=speeds["what"], provenance=provenance, source=a.speeds)
    if a.note:
        card["notes"] = a.note
    with open(a.card, "w") as f:
        json.dump(card, f, indent=1)
    print(f"{a.card}: md_h200.steps_per_second_648 = {card['md_h200']['steps_per_second_648']}")


if __name__ == "__main__":
    main()
