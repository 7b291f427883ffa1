#!/usr/bin/env python3
"""The public API of idemgate-core as text, one item per line, sorted: every path a host can name
(modules, types, fields, variants, methods, functions, constants, re-exports) with its signature.

Reads the rustdoc JSON of the crate (made by crates/core/scripts/public-api.sh) and writes the
listing to stdout. `make check-api` compares it with crates/core/public-api.txt, so a change to what
hosts can reach is a visible diff in review; `make api` refreshes the file.

A type's trait impls are one line (`impl Clone + Debug + Eq for …`), and an item declared in a
private module is listed at the path it is re-exported to, with no separate `pub use` line: a
re-export is listed as such only when it adds a path to an item listed elsewhere.

Types are written by their last path segment (`Vec<u8>`, `StorageKey`): the listing is for reading
a diff, not for resolving names. Auto and blanket trait impls (Send, From<T> for T, …) are left out:
they follow from the types, not from what the crate chose to offer."""

import json
import sys


def main(path, *dep_paths):
    doc = json.load(open(path))
    index, paths = doc["index"], doc["paths"]
    lines = set()
    # The workspace crates the core re-exports (idemgate-json as `request::json`): their rustdoc
    # JSON, by crate name, so what a re-export names is listed whole at the core's path, as if it
    # were declared there.
    deps = {}
    for dep_path in dep_paths:
        dep = json.load(open(dep_path))
        local = {tuple(p["path"]): int(i) for i, p in dep["paths"].items() if p["crate_id"] == 0}
        deps[dep["index"][str(dep["root"])]["name"]] = (dep, local)

    def name_of(id_, written):
        entry = paths.get(str(id_))
        return entry["path"][-1] if entry else written.split("::")[-1]

    def args(a):
        if not a:
            return ""
        if "angle_bracketed" in a:
            ab = a["angle_bracketed"]
            parts = []
            for arg in ab.get("args", []):
                if "type" in arg:
                    parts.append(ty(arg["type"]))
                elif "lifetime" in arg:
                    parts.append(arg["lifetime"])
                elif "const" in arg:
                    parts.append(arg["const"].get("expr", "_"))
                else:
                    parts.append("_")
            for c in ab.get("constraints", []):
                binding = c.get("binding", {})
                if "equality" in binding and "type" in binding["equality"]:
                    parts.append(f"{c['name']} = {ty(binding['equality']['type'])}")
                else:
                    parts.append(c["name"])
            return f"<{', '.join(parts)}>" if parts else ""
        if "parenthesized" in a:
            p = a["parenthesized"]
            out = f"({', '.join(ty(t) for t in p['inputs'])})"
            return out + (f" -> {ty(p['output'])}" if p.get("output") else "")
        return ""

    def bound(b):
        if "trait_bound" in b:
            t = b["trait_bound"]["trait"]
            maybe = "?" if b["trait_bound"].get("modifier") == "maybe" else ""
            return maybe + name_of(t["id"], t["path"]) + args(t.get("args"))
        if "outlives" in b:
            return b["outlives"]
        return "?"

    def ty(t):
        if t is None:
            return "()"
        if isinstance(t, str):
            return t
        (kind, v), = t.items()
        if kind == "resolved_path":
            return name_of(v["id"], v["path"]) + args(v.get("args"))
        if kind in ("primitive", "generic"):
            return v
        if kind == "borrowed_ref":
            life = f"{v['lifetime']} " if v.get("lifetime") else ""
            return f"&{life}{'mut ' if v['is_mutable'] else ''}{ty(v['type'])}"
        if kind == "raw_pointer":
            return f"*{'mut' if v['is_mutable'] else 'const'} {ty(v['type'])}"
        if kind == "slice":
            return f"[{ty(v)}]"
        if kind == "array":
            return f"[{ty(v['type'])}; {v['len']}]"
        if kind == "tuple":
            return f"({', '.join(ty(x) for x in v)})"
        if kind == "impl_trait":
            return "impl " + " + ".join(bound(b) for b in v)
        if kind == "dyn_trait":
            return "dyn " + " + ".join(
                name_of(p["trait"]["id"], p["trait"]["path"]) + args(p["trait"].get("args"))
                for p in v["traits"])
        if kind == "qualified_path":
            return f"<{ty(v['self_type'])}>::{v['name']}"
        if kind == "function_pointer":
            sig = v["sig"]
            return f"fn({', '.join(ty(i[1]) for i in sig['inputs'])}) -> {ty(sig['output'])}"
        return kind

    def generics(g):
        params = []
        for p in g.get("params", []):
            kind = p["kind"]
            if "lifetime" in kind:
                params.append(p["name"])
            elif "type" in kind:
                if kind["type"].get("is_synthetic"):
                    continue
                bounds = kind["type"].get("bounds", [])
                params.append(p["name"] + (": " + " + ".join(bound(b) for b in bounds) if bounds else ""))
            elif "const" in kind:
                params.append(f"const {p['name']}: {ty(kind['const']['type'])}")
        return f"<{', '.join(params)}>" if params else ""

    def sig(name, f):
        s = f["sig"]
        header = f["header"]
        def param(n, t):
            if n != "self":
                return f"{n}: {ty(t)}"
            return {"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(ty(t), f"self: {ty(t)}")

        inputs = ", ".join(param(n, t) for n, t in s["inputs"])
        out = f" -> {ty(s['output'])}" if s.get("output") else ""
        const = "const " if header.get("is_const") else ""
        return f"{const}fn {name}{generics(f['generics'])}({inputs}){out}"

    def impls(path, ids):
        for impl_id in ids:
            impl = index[str(impl_id)]["inner"]["impl"]
            if impl["is_synthetic"] or impl["blanket_impl"] is not None:
                continue
            if impl["trait"] is not None:
                t = impl["trait"]
                if t["path"].split("::")[-1] == "StructuralPartialEq":
                    continue  # the compiler's, written by derive(PartialEq)
                traits.setdefault(path, set()).add(f"{name_of(t['id'], t['path'])}{args(t.get('args'))}")
                continue
            for item_id in impl["items"]:
                item = index[str(item_id)]
                if item["visibility"] != "public":
                    continue
                inner = item["inner"]
                if "function" in inner:
                    lines.add(f"pub {sig(path + '::' + item['name'], inner['function'])}")
                elif "assoc_const" in inner:
                    lines.add(f"pub const {path}::{item['name']}: {ty(inner['assoc_const']['type'])}")

    traits = {}  # a type's path → the traits it implements, written on one line
    visited = set()  # items listed where they are declared (a re-exported crate's: (crate, id))
    crate = [None]  # whose index is being read: None for the core
    reexports = []  # (path, use): listed after the walk

    def walk(module_id, path):
        for item_id in index[str(module_id)]["inner"]["module"]["items"]:
            item = index.get(str(item_id))
            if item is None or item["visibility"] != "public":
                continue
            name = item["name"]
            here = f"{path}::{name}" if name else path
            if "use" in item["inner"]:
                reexports.append((path, item["inner"]["use"]))
            else:
                visited.add(item_id if crate[0] is None else (crate[0], item_id))
                render(item_id, here)

    def render(item_id, here):
        item = index[str(item_id)]
        (kind, v), = item["inner"].items()
        if kind == "module":
            lines.add(f"pub mod {here}")
            walk(item_id, here)
        elif kind == "struct":
            shape = v["kind"]
            # A struct whose fields are not all public says so on its line: a host cannot
            # build it with a literal.
            stripped = isinstance(shape, dict) and shape.get("plain", {}).get("has_stripped_fields")
            private = " (private fields)" if stripped else ""
            lines.add(f"pub struct {here}{generics(v['generics'])}{private}")
            if "plain" in shape:
                for field_id in shape["plain"]["fields"]:
                    field = index[str(field_id)]
                    if field["visibility"] == "public":
                        lines.add(f"pub {here}.{field['name']}: {ty(field['inner']['struct_field'])}")
            elif "tuple" in shape:
                for i, field_id in enumerate(shape["tuple"]):
                    if field_id is not None:
                        field = index[str(field_id)]
                        lines.add(f"pub {here}.{i}: {ty(field['inner']['struct_field'])}")
            impls(here, v["impls"])
        elif kind == "enum":
            lines.add(f"pub enum {here}{generics(v['generics'])}")
            for variant_id in v["variants"]:
                variant = index[str(variant_id)]
                vk = variant["inner"]["variant"]["kind"]
                if vk == "plain":
                    shape = ""
                elif "tuple" in vk:
                    shape = "(" + ", ".join(
                        ty(index[str(f)]["inner"]["struct_field"]) if f is not None else "_"
                        for f in vk["tuple"]) + ")"
                else:
                    shape = " { " + ", ".join(
                        f"{index[str(f)]['name']}: {ty(index[str(f)]['inner']['struct_field'])}"
                        for f in vk["struct"]["fields"]) + " }"
                lines.add(f"pub {here}::{variant['name']}{shape}")
            impls(here, v["impls"])
        elif kind == "function":
            lines.add(f"pub {sig(here, v)}")
        elif kind == "constant":
            lines.add(f"pub const {here}: {ty(v['type'])}")
        elif kind == "static":
            lines.add(f"pub static {here}: {ty(v['type'])}")
        elif kind == "type_alias":
            lines.add(f"pub type {here} = {ty(v['type'])}")
        elif kind == "trait":
            lines.add(f"pub trait {here}")
            for method_id in v["items"]:
                method = index[str(method_id)]
                if "function" in method["inner"]:
                    lines.add(f"pub {sig(here + '::' + method['name'], method['inner']['function'])}")
        elif kind == "macro":
            lines.add(f"pub macro {here}")
        else:
            lines.add(f"pub {kind} {here}")

    root = doc["root"]
    walk(root, index[str(root)]["name"])
    # An item reachable only through re-exports (declared in a private module, or in a workspace
    # crate the core re-exports) is listed whole, once, at its first re-exported path; any other
    # re-export is a line of its own.
    # Modules first, so an item re-exported both alone and in its module is listed in its module.
    for path, use in sorted(reexports, key=lambda r: (paths.get(str(r[1].get("id")), {}).get("kind") != "module", r[0], r[1]["name"])):
        alias = "" if use["source"].split("::")[-1] == use["name"] else f" as {use['name']}"
        glob = "::*" if use["is_glob"] else ""
        target = use.get("id")
        if target is not None and str(target) in index and target not in visited and not use["is_glob"]:
            # Declared in a private module: listed whole at this path, which says all the
            # re-export does.
            visited.add(target)
            render(target, f"{path}::{use['name']}")
            continue
        if target is not None and str(target) in paths and not use["is_glob"]:
            foreign = paths[str(target)]["path"]
            dep, local = deps.get(foreign[0], (None, {}))
            dep_id = local.get(tuple(foreign))
            if dep_id is not None and (foreign[0], dep_id) not in visited:
                visited.add((foreign[0], dep_id))
                core_doc = index, paths
                index, paths, crate[0] = dep["index"], dep["paths"], foreign[0]
                render(dep_id, f"{path}::{use['name']}")
                index, paths, crate[0] = *core_doc, None
                continue
        lines.add(f"pub use {path}::{{{use['source']}{glob}{alias}}}")
    for path, names in traits.items():
        lines.add(f"impl {' + '.join(sorted(names))} for {path}")
    sys.stdout.write("".join(line + "\n" for line in sorted(lines)))


if __name__ == "__main__":
    main(*sys.argv[1:])
