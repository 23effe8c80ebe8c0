#!/usr/bin/env python3
"""Tests of hack/docs/flags.py. Run: python3 hack/docs/flags_test.py"""

import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("flags", os.path.join(HERE, "flags.py"))
flags = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flags)

HELP = """Usage of demo:

Does things.

      --address string                   Address serving /metrics. (default ":8943")
      --dry-run                          Decide, never act.
      --feature-gates mapStringBool      Gates. Options are:
                                         AllAlpha=true|false (ALPHA - default=false)
                                         InPlace=true|false (ALPHA - default=false)
      --leader-elect                     Elect a leader. (default true)
      --a-flag-name-of-thirty-two-chars  Spacing of two.
  -v, --v Level                          number for the log level verbosity
      --cert-hosts strings               Empty: vpa-inplace-webhook.<--ns>.svc *and* more.
"""

DOC = """# Flags

<!-- BEGIN GENERATED: demo --help -->
stale
<!-- END GENERATED: demo --help -->

Notes stay.
"""


class FlagsTest(unittest.TestCase):
    def test_parse_help(self):
        got = flags.parse_help(HELP)
        self.assertEqual([f[1] for f in got], ["address", "dry-run", "feature-gates", "leader-elect",
                                               "a-flag-name-of-thirty-two-chars", "v", "cert-hosts"])
        address, dry, gates, leader, longest, v, hosts = got
        self.assertEqual(address, [None, "address", "string", '":8943"', ["Address serving /metrics."]])
        self.assertEqual(dry[2:4], ["", ""])
        self.assertEqual(gates[4], ["Gates. Options are:", "AllAlpha=true|false (ALPHA - default=false)",
                                    "InPlace=true|false (ALPHA - default=false)"])
        self.assertEqual(leader[3], "true")
        self.assertEqual(v[:3], ["v", "v", "Level"])

    def test_table(self):
        rows = flags.table(flags.parse_help(HELP))
        self.assertEqual(rows[2], "| `--address` | string | `:8943` | Address serving /metrics. |")
        self.assertEqual(rows[3], "| `--dry-run` | bool | `false` | Decide, never act. |")
        self.assertIn("AllAlpha=true\\|false", rows[4])
        self.assertEqual(rows[5], "| `--leader-elect` | bool | `true` | Elect a leader. |")
        self.assertEqual(rows[7], "| `--v`, `-v` | Level |  | number for the log level verbosity |")
        self.assertIn("vpa-inplace-webhook.&lt;--ns>.svc \\*and\\* more.", rows[8])

    def test_unreadable_help_is_an_error(self):
        with self.assertRaises(ValueError):
            flags.parse_help("Usage:\n  something pflag never prints\n")
        with self.assertRaises(ValueError):
            flags.parse_help(HELP + "stray text\n")

    def test_render_replaces_only_the_generated_part(self):
        out = flags.render(DOC, {"demo": HELP})
        self.assertNotIn("stale", out)
        self.assertTrue(out.startswith("# Flags\n\n<!-- BEGIN GENERATED: demo --help -->\n| Flag |"))
        self.assertTrue(out.endswith("<!-- END GENERATED: demo --help -->\n\nNotes stay.\n"))
        self.assertEqual(flags.render(out, {"demo": HELP}), out)
        with self.assertRaises(ValueError):
            flags.render("# no markers\n", {"demo": HELP})

    def test_check_fails_on_drift_and_passes_after_update(self):
        with tempfile.TemporaryDirectory() as d:
            doc, help_file = os.path.join(d, "flags.md"), os.path.join(d, "demo.help")
            with open(doc, "w") as f:
                f.write(DOC)
            with open(help_file, "w") as f:
                f.write(HELP)
            self.assertEqual(flags.main(["--check", doc, "demo=" + help_file]), 1)
            self.assertEqual(flags.main([doc, "demo=" + help_file]), 0)
            self.assertEqual(flags.main(["--check", doc, "demo=" + help_file]), 0)
            with open(help_file, "a") as f:
                f.write("      --new-flag                A flag added later.\n")
            self.assertEqual(flags.main(["--check", doc, "demo=" + help_file]), 1)


if __name__ == "__main__":
    unittest.main()
