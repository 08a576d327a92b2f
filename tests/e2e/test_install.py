#!/usr/bin/env python3
"""`cmake --install`: every file lands where it should under /usr and /usr/local (into a
DESTDIR), the installed binary finds the installed workload through its own location, the
installed example points at the installed trainer, and /usr/bin/python3 imports the helper
from the installed directory. The Debian package (`cpack -G DEB`, read with `dpkg-deb`)
holds the man pages of both sections and /usr/share/doc/tunepack/: the README, docs/ with its
images, and the examples."""

import json
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BUILD, HANG_SCALE, SRC, E2E, main, merged_env

CMAKE = shutil.which("cmake")
CPACK = shutil.which("cpack")
DPKG_DEB = shutil.which("dpkg-deb")
SYSTEM_PY = "/usr/bin/python3"
VERBS = ["run", "status", "trials", "best", "export", "stop", "gpus", "place", "simulate",
         "plan", "agent"]
DOC = "share/doc/tunepack"


def documentation():
    """What /usr/share/doc/tunepack holds, relative to /usr: the source tree's README.md,
    every file of docs/ (docs/img too) and of examples/ (but its CMakeLists.txt)."""
    out = [DOC + "/README.md"]
    for top in ("docs", "examples"):
        for d, _, files in os.walk(os.path.join(SRC, top)):
            rel = os.path.relpath(d, SRC)
            out += [os.path.join(DOC, rel, f) for f in files
                    if not (rel == "examples" and f == "CMakeLists.txt")]
    return sorted(out)


class Install(E2E):

    def install(self, prefix):
        dest = self.path("dest" + prefix.replace("/", "_"))
        p = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix],
                           env=merged_env({"DESTDIR": dest}), capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return dest + prefix

    def assertFiles(self, root, names):
        missing = [n for n in names if not os.path.isfile(os.path.join(root, n))]
        self.assertEqual(missing, [], "not installed under %s" % root)

    def test_usr_layout_has_every_file(self):
        usr = self.install("/usr")
        self.assertFiles(usr, [
            "bin/tunepack",
            "include/tunepack/report.h",
            "lib/python3/dist-packages/tunepack_report.py",
            "lib/python3/dist-packages/tunepack.py",
            "share/bash-completion/completions/tunepack",
            "share/tunepack/workloads/sp.yaml",
            "share/tunepack/workloads/README.md",
            "lib/tunepack/examples/mlp_train",
            "share/tunepack/examples/mlp/experiment.yaml",
            "share/man/man1/tunepack.1",
            "share/man/man5/tunepack-experiment.5",
        ] + ["share/man/man1/tunepack-%s.1" % v for v in VERBS] + documentation())
        self.assertFalse(os.path.exists(os.path.join(usr, DOC, "examples/CMakeLists.txt")))
        self.assertTrue(os.access(os.path.join(usr, "bin/tunepack"), os.X_OK))
        self.assertTrue(os.access(os.path.join(usr, "lib/tunepack/examples/mlp_train"), os.X_OK))
        with open(os.path.join(usr, "share/tunepack/examples/mlp/experiment.yaml")) as f:
            exp = f.read()
        self.assertIn("command: [/usr/lib/tunepack/examples/mlp_train, --lr,", exp)
        self.assertNotIn("./build", exp)

    def test_deb_holds_the_man_pages_and_the_documentation(self):
        if not (CPACK and DPKG_DEB):
            self.skipTest("cpack or dpkg-deb is not installed")
        out = self.path("deb")
        p = subprocess.run([CPACK, "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"),
                            "-B", out], capture_output=True, text=True, timeout=500 * HANG_SCALE)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        debs = [f for f in os.listdir(out) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, os.listdir(out))
        p = subprocess.run([DPKG_DEB, "--contents", os.path.join(out, debs[0])],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        # "-rw-r--r-- root/root 1234 2024-01-01 00:00 ./usr/share/doc/tunepack/README.md"
        held = {line.split(None, 5)[5].split(" -> ")[0] for line in p.stdout.splitlines()}
        want = ["usr/bin/tunepack", "usr/share/man/man1/tunepack-run.1",
                "usr/share/man/man5/tunepack-experiment.5"] + ["usr/" + f for f in documentation()]
        self.assertIn("usr/share/doc/tunepack/docs/img/dashboard-trials.png", want)
        self.assertIn("usr/share/doc/tunepack/examples/mup/train.py", want)
        missing = [f for f in want if "./" + f not in held]
        self.assertEqual(missing, [], "not in %s" % debs[0])

    def test_usr_local_puts_the_helper_in_the_versioned_dist_packages(self):
        local = self.install("/usr/local")
        py = SYSTEM_PY if os.path.exists(SYSTEM_PY) else sys.executable
        ver = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        self.assertFiles(local, ["bin/tunepack",
                                 "lib/python%s/dist-packages/tunepack_report.py" % ver])
        self.assertFalse(os.path.exists(os.path.join(local, "lib/python3/dist-packages")))
        with open(os.path.join(local, "share/tunepack/examples/mlp/experiment.yaml")) as f:
            self.assertIn("/usr/local/lib/tunepack/examples/mlp_train", f.read())

    def test_installed_binary_reads_the_workload_beside_it(self):
        usr = self.install("/usr")
        binary = os.path.join(usr, "bin", "tunepack")
        env = {"TUNEPACK_DATA_DIR": None}
        elsewhere = self.path("elsewhere")
        os.makedirs(elsewhere)
        p = subprocess.run([binary, "simulate", "--space", "SP3", "--cluster", "homog_4",
                            "--policy", "wfd", "--json"], cwd=elsewhere, env=merged_env(env),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["trials"], 96)
        # a space only the installed copy has: the source tree's data/ was not used
        installed = os.path.join(usr, "share/tunepack/workloads/sp.yaml")
        with open(installed, "a") as f:
            f.write("  ONLY_INSTALLED: {models: [shufflenet], batch_sizes: [64], "
                    "lr: {loguniform: [1.0e-3, 1.0e-2], count: 2}}\n")
        p = subprocess.run([binary, "simulate", "--space", "ONLY_INSTALLED", "--cluster",
                            "homog_4", "--json"], cwd=elsewhere, env=merged_env(env),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["trials"], 2)
        # and its errors name the installed file
        with open(installed, "a") as f:
            f.write("  BROKEN: [\n")
        p = subprocess.run([binary, "simulate"], cwd=elsewhere, env=merged_env(env),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(installed + ":", p.stderr)

    def test_system_python_imports_the_installed_helper(self):
        if not os.path.exists(SYSTEM_PY):
            self.skipTest("no /usr/bin/python3")
        usr = self.install("/usr")
        site = os.path.join(usr, "lib/python3/dist-packages")
        p = subprocess.run([SYSTEM_PY, "-c", "import tunepack_report; print(tunepack_report.__file__)"],
                           env=merged_env({"PYTHONPATH": site}), cwd=self.tmp,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), os.path.join(site, "tunepack_report.py"))


if __name__ == "__main__":
    if not CMAKE:
        print("cmake is not on PATH")
        sys.exit(1)
    main()
