#!/usr/bin/python3
"""Reads pynfs results and judges them against tests/pynfs/claimed (run by tests/pynfs/run).

    report.py CLAIMED SELECTION RESULTS.pickle...

Each RESULTS.pickle is what `testserver.py --outfile` wrote: every test of the suite with its
outcome, asked for or not (the run splits into several testserver processes; a test's result
is taken from the run that asked for it). SELECTION is the test selection the run was given,
or `default`: with the default selection a claimed category none of whose tests ran fails,
with another it is only reported as not selected.

Prints a per-category table (category = the st_<name> module), the failed, skipped and warned
tests with the first line of their reason, and the verdict on the claimed categories. Exits 1
when a test of a claimed category failed, was skipped, answered UNSUPPORTED or did not run,
or when the claimed file names a category pynfs does not have.

Only the standard library: the results are unpickled into stand-in classes, no pynfs code.
"""

import collections
import os
import pickle
import re
import sys

# testmod.py's outcome codes (the `outcome` field of a pickled Result).
TEST_NOTRUN, TEST_RUNNING, TEST_WAIT, TEST_OMIT = 0, 1, 2, 3
TEST_FAIL, TEST_NOTSUP, TEST_WARN, TEST_PASS = 4, 5, 6, 7

# The minor version tests/pynfs/run asks for.
MINOR_VERSION = 1

# How wide a reason line may be in the report.
REASON_WIDTH = 150


class Record:
    """Stands in for testmod's Test and Result: their pickled fields, nothing else."""


class ResultsUnpickler(pickle.Unpickler):
    """Unpickles testmod.Test and testmod.Result as Record, and refuses any other class."""

    ALLOWED = {
        ("copy_reg", "_reconstructor"),
        ("copyreg", "_reconstructor"),
        ("__builtin__", "object"),
        ("builtins", "object"),
    }

    def find_class(self, module, name):
        if module == "testmod" and name in ("Test", "Result"):
            return Record
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected class {module}.{name} in pynfs results")


def load(path):
    with open(path, "rb") as f:
        return ResultsUnpickler(f).load()


def selects(test, selection, flags):
    """Whether testserver.py's selection (flags and codes, `no` to leave out; the last that
    matches decides) picks the test, at minor version 1."""
    low, high = test.versions
    if not low <= MINOR_VERSION <= high:
        return False
    picked = False
    for arg in selection:
        include = not arg.lower().startswith("no")
        name = arg if include else arg[2:]
        if name in flags:
            if name in test.flags_list:
                picked = include
        elif name == test.code:
            picked = include
    return picked


def load_run(path):
    """The tests of one testserver.py run, each with `asked`: whether the run's selection asked
    for it. pynfs marks the others with a default OMIT ("Failed runfilter") as it goes; the tests
    it had not reached when the run stopped are judged by the selection the run script wrote
    next to the results (`selection`, one argument a line)."""
    tests = load(path)
    try:
        with open(os.path.join(os.path.dirname(path), "selection")) as f:
            selection = f.read().split()
    except FileNotFoundError:
        selection = None
    flags = {f for t in tests for f in t.flags_list}
    for t in tests:
        r = t.result
        if r.outcome == TEST_OMIT and getattr(r, "default", False):
            t.asked = False
        elif r.outcome == TEST_NOTRUN and selection is not None:
            t.asked = selects(t, selection, flags)
        else:
            t.asked = True
    return tests


def asked(test):
    return test.asked


def kind(test):
    """passed, failed, skipped (a dependency failed, or it never ran), warned or unsupported."""
    o = test.result.outcome
    if o == TEST_PASS:
        return "passed"
    if o == TEST_FAIL:
        return "failed"
    if o == TEST_WARN:
        return "warned"
    if o == TEST_NOTSUP:
        return "unsupported"
    return "skipped"


def reason(test):
    """The first non-empty line of the test's message."""
    r = test.result
    if r.outcome == TEST_RUNNING:
        return "did not finish (the run stopped while it ran)"
    if r.outcome in (TEST_NOTRUN, TEST_WAIT):
        return "did not run (the run stopped first, or a circular dependency)"
    for line in str(getattr(r, "msg", "")).splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= REASON_WIDTH else line[: REASON_WIDTH - 3] + "..."
    return "(no reason given)"


def code_order(test):
    """Sorts codes as people read them: DELEG3 before DELEG23."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", test.code)]


def category(test):
    return test.suite[3:] if test.suite.startswith("st_") else test.suite


def read_claimed(path):
    """Category names, one per line; `#` starts a comment."""
    names = []
    with open(path) as f:
        for line in f:
            name = line.split("#", 1)[0].strip()
            if name:
                names.append(name)
    return names


def merge(runs):
    """One test per code: the one from the run that asked for it, else the first."""
    by_code = {}
    order = []
    for tests in runs:
        for t in tests:
            if t.code not in by_code:
                by_code[t.code] = t
                order.append(t.code)
            elif asked(t) and not asked(by_code[t.code]):
                by_code[t.code] = t
    return [by_code[c] for c in order]


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    claimed_path, selection, pickles = argv[1], argv[2], argv[3:]
    claimed = read_claimed(claimed_path)
    tests = merge(load_run(p) for p in pickles)

    cats = collections.OrderedDict()
    for t in sorted(tests, key=lambda t: category(t)):
        cats.setdefault(category(t), []).append(t)

    counts = {}
    for name, ts in cats.items():
        c = collections.Counter(kind(t) for t in ts if asked(t))
        counts[name] = c
    ran = [t for t in tests if asked(t)]
    total = collections.Counter(kind(t) for t in ran)

    out = []
    shown = "all (the default)" if selection == "default" else selection
    out.append(
        f"pynfs NFSv4.1, selection {shown}: {len(ran)} of {len(tests)} tests asked: "
        f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped, "
        f"{total['warned'] + total['unsupported']} warned"
    )
    out.append("")
    out.append(f"  {'category':<20} {'passed':>6} {'failed':>6} {'skipped':>7} {'warned':>6}")
    not_asked = []
    for name, ts in cats.items():
        c = counts[name]
        if not sum(c.values()):
            not_asked.append(f"{name} ({len(ts)})")
            continue
        mark = "  claimed" if name in claimed else ""
        out.append(
            f"  {name:<20} {c['passed']:>6} {c['failed']:>6} {c['skipped']:>7} "
            f"{c['warned'] + c['unsupported']:>6}{mark}"
        )
    if not_asked:
        out.append(f"  not asked for: {', '.join(not_asked)}")

    for title, kinds in (
        ("failed", ("failed",)),
        ("skipped", ("skipped",)),
        ("warned", ("warned", "unsupported")),
    ):
        listed = [t for t in ran if kind(t) in kinds]
        if not listed:
            continue
        out.append("")
        out.append(f"{title} ({len(listed)}):")
        for t in sorted(listed, key=lambda t: (category(t), code_order(t))):
            tag = " UNSUPPORTED" if kind(t) == "unsupported" else ""
            out.append(f"  {t.code:<9} {category(t)}.{t.name}:{tag} {reason(t)}")

    # The verdict on the claimed categories.
    broken = []
    unjudged = []
    for name in claimed:
        if name not in cats:
            broken.append(f"{name}: pynfs has no such category (a typo in {claimed_path}?)")
            continue
        mine = [t for t in cats[name] if asked(t)]
        if not mine:
            if selection == "default":
                broken.append(f"{name}: missing from the run (none of its tests ran)")
            else:
                unjudged.append(name)
            continue
        for t in sorted(mine, key=code_order):
            k = kind(t)
            if k not in ("passed", "warned"):
                broken.append(f"{name}: {t.code} {t.name} {k}: {reason(t)}")
    clean = [
        n
        for n, c in counts.items()
        if n not in claimed and sum(c.values()) and c["passed"] + c["warned"] == sum(c.values())
    ]

    out.append("")
    if clean:
        out.append(f"passing fully but not claimed: {', '.join(clean)} (claim them in {claimed_path})")
    if unjudged:
        out.append(f"claimed but not in this selection (not judged): {', '.join(unjudged)}")
    judged = [n for n in claimed if n not in unjudged]
    if broken:
        out.append(f"CLAIMED CATEGORIES BROKEN ({len(broken)}):")
        out.extend(f"  {b}" for b in broken)
    else:
        out.append(f"claimed categories pass: {', '.join(judged) if judged else '(none judged)'}")
    print("\n".join(out))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
