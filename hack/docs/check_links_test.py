#!/usr/bin/env python3
"""Tests of hack/docs/check-links.py: each kind of broken link is found, and
what is not a link (code, external URLs) is left alone.

Run: python3 hack/docs/check_links_test.py
"""

import importlib.util
import os
import subprocess
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_links", os.path.join(HERE, "check-links.py"))
check_links = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_links)


class Repo:
    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for name, text in files.items():
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text))

    def check(self, *files):
        return check_links.check(self.root, list(files))


TARGET = """\
    # Title

    ## What the updater does

    ## Kafka on Strimzi: only what the node can take

    ## `--eviction-tolerance` and PDBs

    ## Repeated

    ## Repeated

    Setext heading
    --------------

    <a id="custom-anchor"></a>
"""


class CheckTest(unittest.TestCase):
    def repo(self, files):
        r = Repo(files)
        self.addCleanup(r.dir.cleanup)
        return r

    def test_good_links_pass(self):
        repo = self.repo({
            "docs/target.md": TARGET,
            "docs/code.go": "package x\n",
            "README.md": """\
                [a](docs/target.md) [b](docs/target.md#what-the-updater-does)
                [c](docs/target.md#kafka-on-strimzi-only-what-the-node-can-take)
                [d](docs/target.md#--eviction-tolerance-and-pdbs) [e](docs/target.md#repeated-1)
                [f](docs/target.md#setext-heading) [g](docs/target.md#custom-anchor)
                [h](docs/) [i](docs/code.go#L1-L2) [j](#local) ![img](docs/code.go)
                [k]: docs/target.md#title
                <a href="docs/target.md#repeated">l</a>

                ## Local
            """,
        })
        self.assertEqual(repo.check("README.md"), [])

    def test_each_kind_of_broken_link_is_reported(self):
        repo = self.repo({
            "docs/target.md": TARGET,
            "docs/code.go": "package x\n",
            "README.md": """\
                [missing file](docs/nope.md)
                [missing anchor](docs/target.md#what-the-admission-controller-does)
                [third repeat](docs/target.md#repeated-2)
                [local anchor](#nowhere)
                [ref]: docs/gone.md
                <a href="docs/missing.html">x</a>
                [not a line](docs/code.go#func-main)
                [outside](../../../../etc/passwd)
            """,
        })
        problems = repo.check("README.md")
        expect = [
            "README.md:1: docs/nope.md: no such file or directory",
            'README.md:2: docs/target.md#what-the-admission-controller-does: no heading or id "what-the-admission-controller-does" in docs/target.md',
            'README.md:3: docs/target.md#repeated-2: no heading or id "repeated-2" in docs/target.md',
            'README.md:4: #nowhere: no heading or id "nowhere" in README.md',
            "README.md:5: docs/gone.md: no such file or directory",
            "README.md:6: docs/missing.html: no such file or directory",
            "README.md:7: docs/code.go#func-main: an anchor into a file that is not Markdown can only be a line (#L12)",
        ]
        self.assertEqual(problems[:len(expect)], expect)
        self.assertEqual(len(problems), len(expect) + 1, problems)
        self.assertIn("README.md:8", problems[-1])

    def test_links_relative_to_the_file(self):
        repo = self.repo({
            "docs/a.md": "[up](../README.md#top) [side](b.md)\n",
            "docs/b.md": "# B\n",
            "README.md": "# Top\n",
        })
        self.assertEqual(repo.check("docs/a.md"), [])
        repo = self.repo({"docs/a.md": "[wrong base](docs/b.md)\n", "docs/b.md": "# B\n"})
        self.assertEqual(repo.check("docs/a.md"), ["docs/a.md:1: docs/b.md: no such file or directory"])

    def test_code_and_external_links_are_not_checked(self):
        repo = self.repo({
            "README.md": """\
                ```sh
                echo "[not a link](nowhere.md)"
                ```

                ~~~
                [nor this](nowhere.md)
                ~~~

                `[code span](nowhere.md)` and ``[double `tick`](nowhere.md)``
                [web](https://example.com/nowhere.md#x) [mail](mailto:a@example.com) <https://example.com>
            """,
        })
        self.assertEqual(repo.check("README.md"), [])

    def test_headings_in_code_blocks_are_not_anchors(self):
        repo = self.repo({
            "README.md": """\
                ```
                # not a heading
                ```

                [x](#not-a-heading)
            """,
        })
        self.assertEqual(repo.check("README.md"), ['README.md:5: #not-a-heading: no heading or id "not-a-heading" in README.md'])

    def test_github_slugs(self):
        for heading, slug in [
            ("What the updater does", "what-the-updater-does"),
            ("Kafka on Strimzi: only what the node can take", "kafka-on-strimzi-only-what-the-node-can-take"),
            ("Certificates without scripts (`overlays/self-managed-certs`, `overlays/cert-manager`)",
             "certificates-without-scripts-overlaysself-managed-certs-overlayscert-manager"),
            ("RBAC, rule by rule", "rbac-rule-by-rule"),
            ("Admission (`make bench-admission`)", "admission-make-bench-admission"),
            ("**Bold** and [a link](x.md)", "bold-and-a-link"),
            ("snake_case stays", "snake_case-stays"),
            ("1.33 to 1.37", "133-to-137"),
        ]:
            self.assertEqual(check_links.heading_text_to_slug(heading), slug, heading)

    def test_files_from_git_leave_out_ignored_output(self):
        repo = self.repo({
            ".gitignore": "/_output/\n",
            "README.md": "[x](docs/a.md)\n",
            "docs/a.md": "# A\n",
            "_output/notes.md": "[broken](nowhere.md)\n",
        })
        subprocess.run(["git", "init", "-q", repo.root], check=True)
        self.assertEqual(check_links.markdown_files(repo.root), ["README.md", "docs/a.md"])


if __name__ == "__main__":
    unittest.main()
