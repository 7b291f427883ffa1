"""How the reference tools write a vector file: one case per line, so diffs stay readable."""

import json


def dump(doc):
    """The document with its header fields first, then `cases`, one case per line."""
    head = "".join(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n" for k, v in doc.items() if k != "cases")
    cases = ",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in doc["cases"])
    return "{\n" + head + '  "cases": [\n' + cases + "\n  ]\n}\n"
