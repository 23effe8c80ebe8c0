#!/usr/bin/env python3
"""Tests of hack/docs/check-test-names.py: a test named in a code span must
be declared, in the package named when one is; code blocks and other code
spans are left alone.

Run: python3 hack/docs/check_test_names_test.py
"""

import importlib.util
import os
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_test_names", os.path.join(HERE, "check-test-names.py"))
check_test_names = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_test_names)

GO_TEST = """\
package resize

func TestDecide(t *testing.T) {}
func BenchmarkDecide(b *testing.B) {}
func helperNotATest() {}
"""


class CheckTestNames(unittest.TestCase):
    def run_check(self, doc):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "pkg", "resize"))
            with open(os.path.join(root, "pkg", "resize", "decide_test.go"), "w") as f:
                f.write(GO_TEST)
            with open(os.path.join(root, "doc.md"), "w") as f:
                f.write(textwrap.dedent(doc))
            names = check_test_names.declared(root, ["pkg/resize/decide_test.go"])
            return check_test_names.check(root, ["doc.md"], names)

    def test_declared_names_pass(self):
        self.assertEqual([], self.run_check("""\
            | 1.37 | `TestDecide`, `resize.TestDecide` "a row", `BenchmarkDecide` |
            """))

    def test_missing_test_is_reported(self):
        problems = self.run_check("the cell says `TestRenamedAway` proves it\n")
        self.assertEqual(1, len(problems))
        self.assertIn("doc.md:1: no test TestRenamedAway", problems[0])

    def test_wrong_package_is_reported(self):
        problems = self.run_check("`jobtemplate.TestDecide`\n")
        self.assertEqual(1, len(problems))
        self.assertIn("declared in resize, not in a package jobtemplate", problems[0])

    def test_code_blocks_and_other_spans_are_left_alone(self):
        self.assertEqual([], self.run_check("""\
            ```go
            `TestInsideAFence`
            ```
            `go test -run TestX ./...`, `Testing`, `TestdataDir`, plain TestNotInASpan
            """))


if __name__ == "__main__":
    unittest.main()
