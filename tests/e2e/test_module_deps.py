"""The module-dependency check: the real tree passes, and a planted include that DESIGN.md's
table does not allow (or a module missing from it) is caught with file:line. The link check
too (cmake/modules.cmake): a module's objects link with -Wl,--no-undefined against the modules
the table allows only, so a planted call into another module fails the link."""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("TUNEPACK_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK = os.path.join(SRC, "scripts", "check-module-deps.py")
BUILD = os.environ.get("TUNEPACK_BUILD") or os.path.join(SRC, "build")


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

    def link_place(self, *extra):
        """Link place's objects (and extra) as the build links libtp_place_closed.so: against
        the closed libraries of the modules DESIGN.md allows place (util), nothing else."""
        objects = sorted(glob.glob(os.path.join(BUILD, "CMakeFiles", "tp_place_objects.dir",
                                                "src", "place", "*.o")))
        self.assertTrue(objects, "no objects of src/place in %s" % BUILD)
        libs = subprocess.run(["pkg-config", "--libs", "jansson"], capture_output=True,
                              text=True, check=True).stdout.split()
        return subprocess.run(["cc", "-shared", "-Wl,--no-undefined", "-o",
                               os.path.join(self.root, "libplace.so")] + objects + list(extra) +
                              ["-L" + BUILD, "-ltp_util_closed"] + libs + ["-lglpk", "-lm"],
                              capture_output=True, text=True)

    def test_a_planted_call_into_a_module_not_allowed_fails_the_link(self):
        if not glob.glob(os.path.join(BUILD, "libtp_util_closed.so")):
            # A sanitizer build makes no closed libraries (cmake/modules.cmake); the plain build
            # of the same tree runs this test. Any other build without them is a failure.
            with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
                self.assertIn("TP_SANITIZE:BOOL=ON", f.read(), "no closed libraries in " + BUILD)
            self.skipTest("a TP_SANITIZE build links no closed libraries")
        r = self.link_place()
        self.assertEqual(r.returncode, 0, "place's own link must pass: " + r.stderr)
        planted = os.path.join(self.root, "planted.c")
        with open(planted, "w") as f:
            f.write("int tp__store_open(void);\nint tp__planted(void) { return tp__store_open(); }\n")
        obj = planted[:-2] + ".o"
        subprocess.run(["cc", "-fPIC", "-c", planted, "-o", obj], check=True)
        r = self.link_place(obj)
        self.assertNotEqual(r.returncode, 0, "a call from place into store linked")
        self.assertIn("tp__store_open", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
