"""Thermo output of a LAMMPS log, shared by analyze_rdf.py and analyze_nve.py."""
import re


def thermo_blocks(text):
    """One list of rows (dict column -> float) per run, in order. A block starts at its 'Step ...' header and ends
    at 'Loop time' (or at a row that does not parse); lines with another column count (warnings) are skipped."""
    blocks, header, rows = [], None, []
    for line in text.splitlines():
        tok = line.split()
        if tok and tok[0] == "Step":
            if rows:
                blocks.append(rows)
            header, rows = tok, []
            continue
        if header and len(tok) == len(header):
            try:
                rows.append(dict(zip(header, (float(x) for x in tok))))
            except ValueError:
                header = None
        elif header and tok[:1] == ["Loop"]:
            header = None
    if rows:
        blocks.append(rows)
    return blocks


def timesteps_per_second(text):
    """The last 'timesteps/s' figure LAMMPS printed (None if there is none)."""
    perf = re.findall(r"Performance:.*?([0-9.eE+-]+) timesteps/s", text)
    return float(perf[-1]) if perf else None
