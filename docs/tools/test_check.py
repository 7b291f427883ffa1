"""Unit tests of check.py: each check can fail, and passes what it should.

`make docs` runs them first; the configuration checks need the core's reader, named by the
environment variable IDEMGATE_CHECK_CONFIG (the command `make docs` also gives check.py); without
it those tests are skipped.
"""

import os
import shlex
import subprocess
import tempfile
import unittest

import check

CONFIG_CHECKER = os.environ.get("IDEMGATE_CHECK_CONFIG")


class Tree:
    """A throw-away git repository holding the given files."""

    def __init__(self, files):
        self.directory = tempfile.TemporaryDirectory(prefix="idemgate-docs-test-")
        self.root = self.directory.name
        for name, text in files.items():
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        subprocess.run(["git", "init", "-q", self.root], check=True)

    def problems(self, command=None):
        return check.run(self.root, check.markdown_files(self.root), command)

    def close(self):
        self.directory.cleanup()


def problems(files, command=None):
    tree = Tree(files)
    try:
        return tree.problems(command)
    finally:
        tree.close()


class Slugs(unittest.TestCase):
    def test_github_rules(self):
        self.assertEqual(check.slug("Worked example: the demo's orders"), "worked-example-the-demos-orders")
        self.assertEqual(check.slug("The filter's side: store: {\"kind\": \"remote\"}"),
                         "the-filters-side-store-kind-remote")
        self.assertEqual(check.slug("snake_case and-dash — done"), "snake_case-and-dash--done")
        self.assertEqual(check.heading_text("Use `idempotentFetch` [here](x.md)"), "Use idempotentFetch here")

    def test_duplicates_are_numbered(self):
        page = check.read_page("a.md", "# Setup\n## Setup\n### Setup\n")
        self.assertEqual(check.anchors(page), {"setup", "setup-1", "setup-2"})

    def test_headings_in_code_are_not_headings(self):
        page = check.read_page("a.md", "```yaml\n# not a heading\n```\n# Real\n")
        self.assertEqual(check.anchors(page), {"real"})


class Links(unittest.TestCase):
    def test_good_links_pass(self):
        self.assertEqual(problems({
            "README.md": "# Top\nSee [b](docs/b.md#part-two), [dir](docs), [self](#top), "
                         "[web](https://example.com/x#y), [root](/docs/b.md).\n",
            "docs/b.md": "# B\n## Part two\n<a id=\"custom\"></a>\n[back](../README.md#top) [c](#custom)\n",
            "docs/README.md": "# Docs\n",
        }), [])

    def test_a_broken_link_fails(self):
        found = problems({"README.md": "# Top\nSee [gone](docs/gone.md).\n"})
        self.assertEqual(len(found), 1)
        self.assertIn("README.md:2: link to a missing file: docs/gone.md", found[0])

    def test_a_missing_anchor_fails(self):
        found = problems({
            "README.md": "# Top\n[b](b.md#no-such-part) [self](#nowhere)\n",
            "b.md": "# B\n## Part\n",
        })
        self.assertEqual(len(found), 2)
        self.assertTrue(all("no heading or <a id> for the anchor" in p for p in found))

    def test_a_link_whose_text_spans_lines_is_checked(self):
        found = problems({"README.md": "# Top\nSee the [worked\nexample](b.md#gone).\n", "b.md": "# B\n"})
        self.assertEqual(len(found), 1)
        self.assertIn("README.md:3: no heading or <a id> for the anchor: b.md#gone", found[0])

    def test_links_in_code_are_not_links(self):
        self.assertEqual(problems({
            "README.md": "# Top\n`[x](gone.md)`\n```md\n[y](gone.md)\n```\n",
        }), [])


class Snippets(unittest.TestCase):
    def test_an_unclassified_json_block_fails(self):
        found = problems({"README.md": "# Top\n```json\n{}\n```\n"})
        self.assertEqual(len(found), 1)
        self.assertIn("README.md:3: a ```json block must say", found[0])

    def test_other_blocks_are_not_read(self):
        self.assertEqual(problems({"README.md": "# Top\n```json other\n{\"status\": 409, …}\n```\n"}), [])

    def test_a_route_that_is_not_json_fails(self):
        found = problems({"README.md": "# Top\n```json route\n{ \"prefix\": \n```\n"})
        self.assertEqual(len(found), 1)
        self.assertIn("route snippet is not JSON", found[0])

    def test_yaml_configurations_are_found(self):
        yaml = ("configuration:\n"
                "  \"@type\": type.googleapis.com/google.protobuf.StringValue\n"
                "  value: '{ \"routes\": [{ \"prefix\": \"/o\" }],\n"
                "           \"header\": \"it''s\" }'\n")
        self.assertEqual(check.embedded_configurations(yaml),
                         [(2, '{ "routes": [{ "prefix": "/o" }],            "header": "it\'s" }')])


@unittest.skipUnless(CONFIG_CHECKER, "IDEMGATE_CHECK_CONFIG names the core's configuration reader")
class Configurations(unittest.TestCase):
    command = shlex.split(CONFIG_CHECKER or "")

    def test_good_snippets_pass(self):
        self.assertEqual(problems({
            "README.md": "# Top\n```json config\n{ \"routes\": [{ \"prefix\": \"/o\", \"key\": \"required\" }] }\n```\n"
                         "```json route\n{ \"prefix\": \"/hooks\", \"preset\": \"stripe\",\n"
                         "  \"signature\": { \"secret_env\": \"STRIPE_WEBHOOK_SECRET\" } }\n```\n"
                         "```yaml\n\"@type\": type.googleapis.com/google.protobuf.StringValue\n"
                         "value: '{ \"ttl\": \"1h\" }'\n```\n",
        }, self.command), [])

    def test_a_bad_snippet_fails_naming_where_and_why(self):
        found = problems({
            "README.md": "# Top\n```json config\n{ \"ttl\": \"1h\" }\n```\n"
                         "```json config\n{ \"routes\": [{ \"prefix\": \"/o\", \"key\": \"maybe\" }] }\n```\n",
        }, self.command)
        self.assertEqual(len(found), 1)
        self.assertIn("README.md:6: config_", found[0])
        self.assertIn("routes[0].key", found[0])

    def test_a_bad_route_fails(self):
        found = problems({"README.md": "# Top\n```json route\n{ \"prefx\": \"/o\" }\n```\n"}, self.command)
        self.assertEqual(len(found), 1)
        self.assertIn("README.md:3: config_syntax", found[0])

    def test_a_bad_yaml_configuration_fails(self):
        found = problems({
            "README.md": "# Top\n```yaml\n\"@type\": type.googleapis.com/google.protobuf.StringValue\n"
                         "value: '{ \"lease\": \"forever\" }'\n```\n",
        }, self.command)
        self.assertEqual(len(found), 1)
        self.assertIn("README.md:4: config_invalid at lease", found[0])


if __name__ == "__main__":
    unittest.main()
