"""How the reference tools write a vector file: one case per line, so diffs stay readable."""

import json


def dump(doc):
    """The document with its header fields first, then `cases`, one case per line."""
    head = "".join(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n" for k, v in doc.items() if k != "cases")
    cases = ",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in doc["cases"])
    return "{\n" + head + '  "cases": [\n' + cases + "\n  ]\n}\n"


def reconcile(mode, group, path, expected):
    """Holds the vector file at `path` against `expected(input)`, case by case.

    `--check` prints each case whose `expect` differs; `--write` fills every `expect` in and
    rewrites the file. Returns how many cases differed (always 0 for `--write`)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    bad = 0
    for case in doc["cases"]:
        want = expected(case["input"])
        if mode == "--write":
            case["expect"] = want
        elif case.get("expect") != want:
            bad += 1
            print(f"{group}/{case['name']}: file says {case.get('expect')}, reference says {want}")
    if mode == "--write":
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump(doc))
    return bad
