"""Option files for the command-line tools: a YAML or JSON mapping of option names to values.

Keys are the long option names with or without the dashes (`max-minutes`, `max_minutes`); list options take lists.
The file sets the parser's defaults, so flags on the command line override it."""
import argparse
import json
import os
from typing import Dict, Set


def read_config(path: str) -> Dict:
    if not os.path.exists(path):
        raise SystemExit(f"{path}: no such config file")
    text = open(path).read()
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}: not valid JSON ({e})") from None
    else:
        try:
            import yaml
        except ImportError:
            raise SystemExit(f"{path}: reading YAML needs PyYAML (Debian: python3-yaml); or write the file as "
                             f"JSON (.json)") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SystemExit(f"{path}: not valid YAML ({e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a mapping of option names to values, got {type(data).__name__}")
    return data


def _convert_one(action, value, where):
    if isinstance(value, dict) and len(value) == 1 and None in value.values():
        # YAML reads a plain scalar ending in ':' (such as a frame range md.xyz@900:) as a mapping
        text = f"{next(iter(value))}:"
        raise SystemExit(f"{where}: YAML read {text!r} as a mapping; quote it: '{text}'")
    if isinstance(value, (dict, list)):
        raise SystemExit(f"{where}: expected a single value, got {value!r}")
    if action.type is None:
        if isinstance(value, bool):   # YAML reads unquoted yes/no/on/off (and the element No) as booleans
            raise SystemExit(f"{where}: {value!r} read as a boolean; quote it if a name is meant")
        value = str(value)
    elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SystemExit(f"{where}: {value!r} is not a {action.type.__name__}")
    else:
        try:
            value = action.type(value)
        except (TypeError, ValueError):
            raise SystemExit(f"{where}: {value!r} is not a {action.type.__name__}") from None
    if action.choices is not None and value not in action.choices:
        raise SystemExit(f"{where}: {value!r} is not one of {list(action.choices)}")
    return value


def _convert(action, value, where):
    if action.nargs == 0:   # flags (store_true, --x/--no-x)
        if not isinstance(value, bool):
            raise SystemExit(f"{where}: expected true or false, got {value!r}")
        return value
    if action.nargs in ("+", "*"):
        values = value if isinstance(value, list) else [value]
        if action.nargs == "+" and not values:
            raise SystemExit(f"{where}: expected at least one value")
        return [_convert_one(action, v, where) for v in values]
    if value is None and action.default is None:
        return None
    return _convert_one(action, value, where)


def apply_config(parser: argparse.ArgumentParser, path: str, skip=("config", "help")) -> Set[str]:
    """Sets the parser's defaults from the file; returns the option names (dests) the file gave."""
    by_name = {}
    for action in parser._actions:
        if action.dest in skip:
            continue
        by_name[action.dest] = action
        for opt in action.option_strings:
            by_name[opt.lstrip("-").replace("-", "_")] = action
    defaults = {}
    for key, value in read_config(path).items():
        action = by_name.get(str(key).replace("-", "_"))
        if action is None:
            raise SystemExit(f"{path}: unknown option '{key}'")
        defaults[action.dest] = _convert(action, value, f"{path}: option '{key}'")
    parser.set_defaults(**defaults)
    return set(defaults)
