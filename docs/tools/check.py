#!/usr/bin/env python3
"""Checks the repository's Markdown: `make docs` runs it (Python 3 standard library only).

Over every Markdown file git knows (tracked, or new and not ignored; `node_modules` skipped, and
the parts of generated pages, `INCLUDED`, which are checked where they are included):

1. **Links.** Every relative link `[text](path)`, `![alt](path)` or `[ref]: path` names a file
   or directory that exists (relative to the page; a leading `/` is the repository's root).
   Absolute URLs (`https:`, `mailto:` …) are not fetched.
2. **Anchors.** Every `#anchor` of a link into a Markdown file (or into the page itself) is a
   heading of that file under GitHub's rules — the heading's text, lower-cased, every character
   that is not a letter, a digit, a space, `-` or `_` dropped, each space made `-`, and a repeated
   slug suffixed `-1`, `-2` … in order — or an explicit `<a id="…">` / `<a name="…">`. A link
   into a directory looks at its `README.md`. Anchors into other files (`#L10` of source) are not
   checked.
3. **JSON snippets.** Every fenced block whose info string starts with the word `json` says what
   it is by its second word (GitHub highlights by the first word only, so the block still renders
   as JSON):

       ```json config      a whole filter configuration
       ```json route       one route object, or a list of them: checked as {"routes": [...]}
       ```json other       not a configuration (a response, a problem body, a record ...)

   A `json` block without one of these words fails. Configurations (and routes) are read by the
   core's own reader: `crates/core/examples/check_config.rs`, one process for every snippet, which
   resolves every `secret_env` to a fixed test secret.
4. **Configurations inside Envoy YAML.** In a fenced `yaml` block, the single-quoted string after
   `value:` that follows a `google.protobuf.StringValue` type (the way an envoy.yaml gives the
   filter its configuration) is checked as a whole configuration too. Istio's `pluginConfig` and
   Envoy Gateway's `config` are YAML objects, which the standard library cannot read:
   `make test-examples` checks those manifests against `examples/envoy/envoy.yaml`.

Headings inside fenced blocks are not headings, and links inside code (fenced or `inline`) are
not links. Setext headings (text underlined with `===`) are not used in this repository and are
not recognised.

Usage: check.py [--root DIR] [--config-checker "COMMAND"] [FILE.md ...]
The config checker command gets the snippet files as its arguments; without one, snippets are
not checked (the unit tests use that). Exit status 1 and one line per problem when anything fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\".*\")?\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
CODE_SPAN = re.compile(r"(`+)((?:(?!\n\s*\n)[^`]|(?!\1)`)+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
KINDS = ("config", "route", "other")


@dataclass
class Block:
    """A fenced block: its info string, first line number (1-based, of the content) and text."""

    info: str
    line: int
    text: str


@dataclass
class Page:
    path: str
    lines: list[str]
    prose: list[tuple[int, str]] = field(default_factory=list)  # (line number, text) outside fences
    blocks: list[Block] = field(default_factory=list)


def read_page(path: str, text: str) -> Page:
    page = Page(path, text.split("\n"))
    fence: tuple[str, str, int] | None = None
    body: list[str] = []
    for number, line in enumerate(page.lines, 1):
        match = FENCE.match(line)
        if fence is None:
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence = (match.group(1), match.group(2).strip(), number + 1)
                body = []
            else:
                page.prose.append((number, line))
        elif match and match.group(1)[0] == fence[0][0] and len(match.group(1)) >= len(fence[0]) \
                and not match.group(2).strip():
            page.blocks.append(Block(fence[1], fence[2], "\n".join(body)))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        page.blocks.append(Block(fence[1], fence[2], "\n".join(body)))
    return page


def heading_text(raw: str) -> str:
    """The text GitHub renders for a heading's source: code spans keep their content, links their
    text, HTML tags nothing."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.strip()


def slug(text: str) -> str:
    """GitHub's anchor for a heading's rendered text (before duplicates are numbered)."""
    kept = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(page: Page) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in page.prose:
        for name in EXPLICIT_ANCHOR.findall(line):
            out.add(name)
        match = ATX.match(line)
        if not match:
            continue
        base = slug(heading_text(match.group(2)))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(page: Page) -> list[tuple[int, str]]:
    """(line, target) of every link in the page's prose; a link's text may span lines."""
    prose = dict(page.prose)
    text = "\n".join(prose.get(n, "") for n in range(1, len(page.lines) + 1))
    text = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out = []
    for match in INLINE_LINK.finditer(text):
        out.append((text.count("\n", 0, match.start(1)) + 1, match.group(1)))
    for number, line in page.prose:
        definition = REF_DEF.match(line)
        if definition:
            out.append((number, definition.group(1)))
    return sorted(out)


class Checker:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.pages: dict[str, Page] = {}
        self.problems: list[str] = []

    def page(self, rel: str) -> Page | None:
        rel = os.path.normpath(rel)
        if rel not in self.pages:
            full = os.path.join(self.root, rel)
            if not os.path.isfile(full):
                return None
            with open(full, encoding="utf-8") as handle:
                self.pages[rel] = read_page(rel, handle.read())
        return self.pages[rel]

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def check_links(self, rel: str) -> None:
        page = self.page(rel)
        assert page is not None
        for number, target in links(page):
            where = f"{rel}:{number}"
            if SCHEME.match(target) or target.startswith("//"):
                continue
            path, _, anchor = target.partition("#")
            if path:
                base = self.root if path.startswith("/") else os.path.dirname(os.path.join(self.root, rel))
                full = os.path.normpath(os.path.join(base, path.lstrip("/")))
                if not full.startswith(self.root) or not os.path.exists(full):
                    self.fail(where, f"link to a missing file: {target}")
                    continue
                target_rel = os.path.relpath(full, self.root)
                if os.path.isdir(full):
                    target_rel = os.path.join(target_rel, "README.md")
            else:
                target_rel = rel
            if not anchor or not target_rel.endswith(".md"):
                continue
            linked = self.page(target_rel)
            if linked is None:
                self.fail(where, f"anchor into a directory without README.md: {target}")
            elif anchor not in anchors(linked):
                self.fail(where, f"no heading or <a id> for the anchor: {target}")

    def snippets(self, rel: str) -> list[tuple[str, str]]:
        """(where, configuration text) for every configuration the page shows; classification
        failures are recorded."""
        page = self.page(rel)
        assert page is not None
        out = []
        for block in page.blocks:
            words = block.info.split()
            where = f"{rel}:{block.line}"
            if words and words[0] == "json":
                kind = words[1] if len(words) > 1 else None
                if kind not in KINDS:
                    self.fail(where, "a ```json block must say `json config`, `json route` or `json other`")
                elif kind == "config":
                    out.append((where, block.text))
                elif kind == "route":
                    try:
                        routes = json.loads(block.text)
                    except ValueError as error:
                        self.fail(where, f"route snippet is not JSON: {error}")
                        continue
                    wrapped = routes if isinstance(routes, list) else [routes]
                    out.append((where, json.dumps({"routes": wrapped})))
            elif words and words[0] in ("yaml", "yml"):
                for offset, value in embedded_configurations(block.text):
                    out.append((f"{rel}:{block.line + offset}", value))
        return out

    def check_snippets(self, snippets: list[tuple[str, str]], command: list[str]) -> None:
        if not snippets:
            return
        with tempfile.TemporaryDirectory(prefix="idemgate-docs-") as directory:
            names = {}
            for i, (where, text) in enumerate(snippets):
                name = os.path.join(directory, f"{i:04}.json")
                with open(name, "w", encoding="utf-8") as handle:
                    handle.write(text)
                names[name] = where
            result = subprocess.run(command + list(names), capture_output=True, text=True, check=False)
            if result.returncode == 0:
                return
            output = (result.stdout + result.stderr).strip()
            for name, where in names.items():
                output = output.replace(name, where)
            self.fail("configuration snippet", output or f"{command[0]} exited {result.returncode}")


def embedded_configurations(yaml: str) -> list[tuple[int, str]]:
    """(line offset, JSON) of each single-quoted `value: '…'` after a
    `google.protobuf.StringValue` type; YAML folds the string's line breaks into spaces and reads
    `''` as one quote."""
    out = []
    lines = yaml.split("\n")
    armed = False
    for i, line in enumerate(lines):
        if "type.googleapis.com/google.protobuf.StringValue" in line:
            armed = True
            continue
        match = re.match(r"^\s*value:\s*'", line)
        if not (armed and match):
            continue
        armed = False
        rest = line[match.end():] + "\n" + "\n".join(lines[i + 1:])
        text, j = [], 0
        while j < len(rest):
            if rest[j] == "'":
                if rest[j + 1:j + 2] != "'":
                    break
                j += 1
            text.append(" " if rest[j] == "\n" else rest[j])
            j += 1
        out.append((i, "".join(text)))
    return out


# Markdown that the core includes in a generated page: its links are relative to that page.
INCLUDED = {"crates/core/src/config/describe/header.md": "docs/reference/configuration.md"}


def markdown_files(root: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.md"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.split("\n")
    return sorted({f for f in listed if f and "node_modules/" not in f and f not in INCLUDED and os.path.isfile(os.path.join(root, f))})


def run(root: str, files: list[str], command: list[str] | None) -> list[str]:
    checker = Checker(root)
    snippets: list[tuple[str, str]] = []
    for rel in files:
        checker.check_links(rel)
        snippets += checker.snippets(rel)
    if command:
        checker.check_snippets(snippets, command)
    return checker.problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.getcwd())
    parser.add_argument("--config-checker", help="command that checks configuration files")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or markdown_files(args.root)
    command = shlex.split(args.config_checker) if args.config_checker else None
    problems = run(args.root, files, command)
    for problem in problems:
        print(problem)
    print(f"docs: {len(files)} Markdown files, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
