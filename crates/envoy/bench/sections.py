"""Rewrites one generated section of BENCHMARKS.md (between its begin and end markers), keeping
everything else; used by bench.py (`make bench`) and work.py (`make bench-work`). Stdlib only."""
from pathlib import Path


def write_section(path, begin, end, section, heading=""):
    """Replaces the text from `begin` to `end` with `section` (which carries both markers); if the
    markers are not there yet, appends `heading` and the section. A missing file starts empty."""
    out = Path(path)
    old = out.read_text() if out.is_file() else "# Benchmarks\n"
    if begin in old and end in old:
        new = old[: old.index(begin)] + section + old[old.index(end) + len(end):]
    else:
        new = old.rstrip() + "\n\n" + heading + section + "\n"
    out.write_text(new)
    return out
