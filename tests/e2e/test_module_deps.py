"""The module-dependency check: the real tree passes, and a planted include that DESIGN.md's
table does not allow (or a module missing from it) is caught with file:line."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("TUNEPACK_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK = os.path.join(SRC, "scripts", "check-module-deps.py")


def check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)


class ModuleDeps(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="tp_deps_")
        shutil.copy(os.path.join(SRC, "DESIGN.md"), self.root)
        shutil.copytree(os.path.join(SRC, "src"), os.path.join(self.root, "src"))

    def tearDown(self):
        shutil.rmtree(self.root)

    def test_the_tree_keeps_to_the_table(self):
        r = check(SRC)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_planted_edge_is_caught_with_its_line(self):
        path = os.path.join(self.root, "src", "place", "place.c")
        with open(path) as f:
            lines = f.read().split("\n")
        lines.insert(3, '#include "store/store.h"')
        with open(path, "w") as f:
            f.write("\n".join(lines))
        r = check(self.root)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("src/place/place.c:4: includes store/", r.stdout)

    def test_a_module_missing_from_the_table_is_caught(self):
        os.makedirs(os.path.join(self.root, "src", "unlisted"))
        with open(os.path.join(self.root, "src", "unlisted", "unlisted.c"), "w") as f:
            f.write('#include "util/util.h"\n')
        r = check(self.root)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("src/unlisted: module missing", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
