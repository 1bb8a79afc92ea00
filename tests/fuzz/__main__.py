"""``make fuzz``: every coverage-guided target of :mod:`tests.fuzz.targets`, one process each,
for a set time, then a table of what each tried.

    python -m tests.fuzz [--seconds N] [--engine atheris|hypothesis] [--only NAME ...]

The engine is atheris (libFuzzer's coverage-guided mutation) when it is installed, else
hypothesis drawing bytes without coverage. A target that finds an input breaking its rule
stops there; the input is kept under ``--artifacts`` (its path is in the table) and the
command exits 1."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz.targets import TARGETS

_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
_COV = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)")
_CRASH = re.compile(r"Test unit written to (\S+)")


def run_one(name: str, seconds: float, engine: str, artifacts: Path) -> dict[str, str]:
    """One target in a process of its own (its temporary files in a folder removed after)."""
    scratch = Path(tempfile.mkdtemp(prefix=f"tether-fuzz-{name}-"))
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONHASHSEED": "0"}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "tests.fuzz.targets", name, "--seconds", str(seconds),
                               "--engine", engine, "--artifacts", str(artifacts / name)],
                              env=env, capture_output=True, text=True, errors="replace",
                              timeout=seconds * 3 + 300)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = f"{exc.stdout or ''}{exc.stderr or ''}", -1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    inputs = _DONE.findall(output)
    coverage = _COV.findall(output)
    crash = _CRASH.search(output)
    if code == 0 and inputs:
        result = "no failure"
    elif crash:
        result = f"FAILED: {crash.group(1)}"
    elif code == -1:
        result = "FAILED: no end in time (a hang?)"
    else:
        last = [line for line in output.strip().splitlines() if line.strip()][-1:] or ["?"]
        result = f"FAILED (exit {code}): {last[0][:120]}"
    return {
        "target": name, "parser": TARGETS[name].parser, "engine": engine,
        "seconds": f"{time.monotonic() - started:.0f}",
        "inputs tried": inputs[-1][0] if inputs else "?",
        "coverage (edges / features)": f"{coverage[-1][0]} / {coverage[-1][1]}" if coverage else "-",
        "corpus": coverage[-1][2] if coverage else "-",
        "result": result,
        "output": output,
    }


def table(rows: list[dict[str, str]]) -> str:
    columns = ["target", "parser", "engine", "seconds", "inputs tried", "coverage (edges / features)", "corpus",
               "result"]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    lines = ["| " + " | ".join(c.ljust(widths[c]) for c in columns) + " |",
             "|" + "|".join("-" * (widths[c] + 2) for c in columns) + "|"]
    lines += ["| " + " | ".join(r[c].ljust(widths[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="per target (default 60)")
    parser.add_argument("--engine", choices=["atheris", "hypothesis"],
                        default="atheris" if importlib.util.find_spec("atheris") else "hypothesis")
    parser.add_argument("--only", nargs="+", choices=sorted(TARGETS), metavar="NAME", help="these targets only")
    parser.add_argument("--artifacts", type=Path, default=Path(tempfile.gettempdir()) / "tether-fuzz",
                        help="where failing inputs are kept (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.engine == "hypothesis":
        print("python -m tests.fuzz: atheris is not installed here: hypothesis draws the inputs (no coverage)",
              file=sys.stderr)
    rows = []
    for name in args.only or list(TARGETS):
        print(f"fuzzing {name} for {args.seconds:g} s ({args.engine}) ...", file=sys.stderr, flush=True)
        row = run_one(name, args.seconds, args.engine, args.artifacts)
        if row["result"] != "no failure":
            print(row["output"][-4000:], file=sys.stderr)
        rows.append(row)
    print(table(rows))
    return 0 if all(r["result"] == "no failure" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
