"""The battery of issue 12: bad inputs, faults and races through the ``clir`` command.

Runs every case of ``tests/battery_cases.py`` (which says what each case does and how it is
classified), prints one JSON object (every case and the totals) and a Markdown table of totals per
category, and exits 1 if any case is not the ``clear error`` or ``ok`` it expects.

    python experiments/battery.py              # all cases: a few minutes on 2 cores
    python experiments/battery.py --fast       # only the in-process ones (tests/test_battery.py)
    python experiments/battery.py --only kill  # cases whose name holds 'kill'
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "tests" / "battery_cases.py"


def _harness():
    spec = importlib.util.spec_from_file_location("battery_cases", HARNESS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fast", action="store_true", help="only the in-process cases")
    parser.add_argument("--only", metavar="TEXT", help="only the cases whose name or category holds TEXT")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the JSON here instead of stdout")
    parser.add_argument("--keep", action="store_true", help="keep the cases' directories (printed)")
    parser.add_argument("--quiet", action="store_true", help="no line per case on stderr")
    args = parser.parse_args(argv)

    battery = _harness()
    cases = battery.fast_cases() if args.fast else battery.all_cases()
    if args.only:
        cases = [c for c in cases if args.only in c.name or args.only in c.category]
        if not cases:  # it had run nothing and passed, exit 0
            which = "in-process case" if args.fast else "case"
            parser.error(f"--only {args.only!r}: no {which} has it in its name or category")

    def show(result) -> None:
        if not args.quiet:
            mark = "  " if result.passed else "XX"
            print(f"{mark} {result.seconds:6.2f}s [{result.outcome}] {result.name}", file=sys.stderr)

    root = Path(tempfile.mkdtemp(prefix="clir-battery-"))
    try:
        results = battery.run_battery(cases, root, show)
    finally:
        if args.keep:
            print(f"cases kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    payload = battery.report(results)
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if args.json:
        args.json.write_text(text + "\n")
    else:
        print(text)
    print()
    print(battery.markdown(payload["totals"]))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
