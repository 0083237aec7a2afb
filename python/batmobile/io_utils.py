"""Reading the files the command-line tools are given: training checkpoints (a version-tolerant torch.load:
weights_only appeared in torch 1.13 and became the default in 2.6) and model files, with every problem of the file
itself (missing, not a checkpoint, truncated, checksum mismatch) raised as InputError, whose message names the file
and says what to do; batmobile.cli prints it as one `error:` line."""
import inspect
import os
import zipfile

import torch


class InputError(ValueError):
    """A bad input of a command: a missing or unreadable file, or a file or option value that is not what the command
    needs. The message names it and says what to do."""


def _first_line(e: BaseException) -> str:
    """The exception's type and the first line of its message (torch's messages go on with a C++ stack)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def _zip_names(path: str, what: str, hint: str):
    """The member names of the zip archive at path (torch.save and torch.jit.save both write zip archives)."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such {what}; {hint}")
    if os.path.isdir(path):
        raise InputError(f"{path}: a directory, not a {what}; {hint}")
    try:
        with zipfile.ZipFile(path) as z:
            return z.namelist()
    except (zipfile.BadZipFile, EOFError):
        raise InputError(f"{path}: not a {what}: not a zip archive (a truncated or damaged file, or another kind of "
                         f"file); {hint}") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read the {what} ({e.strerror or _first_line(e)}); {hint}") from None


def _is_torchscript(names) -> bool:
    return any(n.endswith("/constants.pkl") or "/code/" in n for n in names)


CHECKPOINT_HINT = "give the checkpoint.pt that batmobile-train writes in its --out directory"
MODEL_HINT = "give a model file written by batmobile-export (potentials/*.pt)"


def load_checkpoint(path: str, map_location="cpu"):
    """A training checkpoint of batmobile.train (a dict with at least "model" and "hyperparameters")."""
    names = _zip_names(path, "training checkpoint", CHECKPOINT_HINT)
    if _is_torchscript(names):
        raise InputError(f"{path}: a model file (TorchScript), not a training checkpoint; {CHECKPOINT_HINT}")
    kwargs = {"weights_only": False} if "weights_only" in inspect.signature(torch.load).parameters else {}
    try:
        ckpt = torch.load(path, map_location=map_location, **kwargs)
    except Exception as e:   # whatever the unpickler meets in a damaged file
        raise InputError(f"{path}: not readable as a training checkpoint ({_first_line(e)}); the file is damaged or "
                         f"of another kind; {CHECKPOINT_HINT}") from None
    if not isinstance(ckpt, dict) or not {"model", "hyperparameters"} <= set(ckpt):
        raise InputError(f"{path}: not a training checkpoint of batmobile.train (no model and hyperparameters "
                         f"entries); {CHECKPOINT_HINT}")
    return ckpt


def load_model_file(path: str, dtype: torch.dtype = torch.float64):
    """batmobile.export.load_potential, with a missing, damaged, foreign or altered file (checksum mismatch) raised as
    InputError."""
    names = _zip_names(path, "model file", MODEL_HINT)
    if not _is_torchscript(names):
        raise InputError(f"{path}: not a model file (a zip archive without TorchScript code: a training checkpoint? "
                         f"export it with batmobile-export); {MODEL_HINT}")
    from .export import load_potential   # export imports this module
    try:
        return load_potential(path, dtype)
    except ValueError as e:   # the loader's own checks: format, version, units, checksum
        raise InputError(" ".join(str(e).split()) or f"{path}: {type(e).__name__}; {MODEL_HINT}") from None
    except (RuntimeError, KeyError, EOFError) as e:
        raise InputError(f"{path}: not readable as a model file ({_first_line(e)}); {MODEL_HINT}") from None
