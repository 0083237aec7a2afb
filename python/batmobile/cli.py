"""Entry points of the console scripts batmobile-train, batmobile-export, batmobile-evaluate, batmobile-committee
(pyproject.toml) and of `python -m batmobile.<tool>`.

Each takes --version (prints `batmobile <version>`) and ends a bad input with ONE line `error: <what and what to do>`
on stderr and exit status 2, not a traceback: a missing or damaged file (InputError), bad data (DataError), a bad
option or config value (the parsers' and config files' SystemExit messages). Anything else is a bug and keeps its
traceback. --traceback (any tool, taken out before the tool parses its options) shows the traceback of the expected
errors too.

The tools' main(argv) functions stay plain functions that raise (the tests and batmobile.committee call them)."""
import argparse
import os
import sys
import warnings

from ._version import __version__

EXIT_ERROR = 2
VERSION_LINE = f"batmobile {__version__}"


class ArgumentParser(argparse.ArgumentParser):
    """argparse with --version and a one-line error (argparse prints the usage and then `prog: error: ...`)."""

    def __init__(self, *args, **kwargs):
        script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        if "prog" not in kwargs and script.endswith(".py") and os.path.basename(os.path.dirname(script)) == "batmobile":
            kwargs["prog"] = "python -m batmobile." + os.path.basename(script)[:-3]   # not "train.py"
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=VERSION_LINE)

    def error(self, message):
        self.exit(EXIT_ERROR, f"error: {message} (see --help)\n")


def one_line(message) -> str:
    text = " ".join(str(message).split())
    return text if text.startswith("error:") else f"error: {text}"


def run(main, argv=None, expected=()):
    """Calls main(argv) (argv: sys.argv[1:] when None); returns the exit status for sys.exit()."""
    from .data import DataError
    from .io_utils import InputError
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    if "--version" in argv[:end]:
        print(VERSION_LINE)
        return 0
    show_traceback = "--traceback" in argv[:end]
    if show_traceback:
        argv = [a for a in argv[:end] if a != "--traceback"] + argv[end:]
    format_warning = warnings.formatwarning
    if not show_traceback:   # a warning as one line too, not "file:line: UserWarning: ..." and the source line
        warnings.formatwarning = lambda message, category, *rest: f"warning: {' '.join(str(message).split())}\n"
    try:
        main(argv)
        return 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):   # --help (0), a parser error already printed (2)
            return e.code or 0
        if show_traceback:
            raise
        message = e.code
    except (DataError, InputError) + tuple(expected) as e:
        if show_traceback:
            raise
        message = str(e) or type(e).__name__
    except OSError as e:   # a file named on the command line that cannot be read or written
        if e.filename is None or show_traceback:
            raise
        message = f"{e.filename}: {e.strerror or type(e).__name__}"
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = format_warning
    print(one_line(message), file=sys.stderr, flush=True)
    return EXIT_ERROR


def train(argv=None):
    from .train import main
    return run(main, argv)


def evaluate(argv=None):
    from .evaluate import main
    return run(main, argv)


def committee(argv=None):
    from .committee import main
    return run(main, argv)


def export(argv=None):
    from .export import main
    return run(main, argv, expected=(ValueError,))   # its loader's checks (format, version, checksum)
