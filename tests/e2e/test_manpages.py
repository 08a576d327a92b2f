#!/usr/bin/env python3
"""Man pages and bash completion follow the verbs' --help: every verb `tunepack --help`
lists has a page that parses (and renders without warnings when groff is here) and names
every long option its --help lists; the completion offers the same verbs and options, file
names for FILE, directories for DIR and policy names for --policy."""

import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import SRC, E2E, main

MAN = os.path.join(SRC, "man")
COMPLETION = os.path.join(SRC, "completion", "tunepack.bash")


def long_options(text):
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text)) - {"--help"})


class ManPages(E2E):

    def verbs(self):
        p = self.tp("--help")
        self.assertExit(p, 0)
        listed = re.findall(r"^  (\w+) ", p.stdout.split("commands:", 1)[1], re.M)
        self.assertIn("simulate", listed)
        return listed

    def help_options(self, verb):
        p = self.tp(verb, "--help")
        self.assertExit(p, 0)
        return long_options(p.stdout)

    def page(self, name):
        path = os.path.join(MAN, name + ".1")
        self.assertTrue(os.path.isfile(path), "no man page %s" % path)
        with open(path) as f:
            return f.read()

    def test_every_listed_verb_has_a_page_with_its_options(self):
        for verb in self.verbs() + ["agent"]:  # agent is hidden from --help, but has a page
            text = self.page("tunepack-" + verb)
            th = re.search(r'^\.TH (\S+) 1 "[^"]*" "tunepack [0-9.]+"', text, re.M)
            self.assertIsNotNone(th, "tunepack-%s.1: no .TH line" % verb)
            self.assertEqual(th.group(1), "TUNEPACK\\-" + verb.upper())
            for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
                            "EXAMPLES", "SEE ALSO"):
                self.assertIn("\n.SH " + section + "\n", text, "tunepack-%s.1" % verb)
            plain = text.replace("\\-", "-")
            mentioned = long_options(plain)
            for opt in self.help_options(verb):
                self.assertIn(opt, mentioned, "tunepack-%s.1 does not mention %s" % (verb, opt))
            self.assertIn("tunepack %s" % verb, plain.replace("\n.B ", "\n"))
        top = self.page("tunepack")
        for verb in self.verbs():
            self.assertIn(".B %s\n" % verb, top)

    def test_pages_render_without_warnings(self):
        groff = shutil.which("groff")
        if not groff:
            self.skipTest("groff is not installed (groff-base); .TH and options checked above")
        for name in sorted(os.listdir(MAN)):
            p = subprocess.run([groff, "-man", "-Tutf8", "-ww", os.path.join(MAN, name)],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, name + p.stderr)
            self.assertEqual(p.stderr, "", name)
            text = re.sub(".\b", "", p.stdout)  # bold and underline by overstriking
            self.assertIn("\nNAME\n", text)
            self.assertIn("\nEXIT STATUS\n", text)


class Completion(E2E):

    def complete(self, *words, cwd=None):
        """COMPREPLY for the command line `words`, completing its last word."""
        script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tunepack; '
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        p = subprocess.run(["bash", "-c", script, "complete", COMPLETION] + list(words),
                           cwd=cwd or self.tmp, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        return sorted(w for w in p.stdout.split("\n") if w)

    def test_verbs_and_every_verbs_options_match_help(self):
        listed = ManPages.verbs(self)
        self.assertEqual(self.complete("tunepack", ""),
                         sorted(listed + ["--help", "--version"]))
        self.assertEqual(self.complete("tunepack", "s"),
                         sorted(v for v in listed if v.startswith("s")))
        for verb in listed + ["agent"]:
            want = ManPages.help_options(self, verb)
            self.assertEqual(self.complete("tunepack", verb, "--"), sorted(want + ["--help"]),
                             verb)

    def test_policy_names_and_option_values(self):
        self.assertEqual(self.complete("tunepack", "simulate", "--policy", "w"), ["wf", "wfd"])
        self.assertEqual(len(self.complete("tunepack", "place", "--policy", "")), 9)
        self.assertIn("one-per-gpu", self.complete("tunepack", "plan", "--policy", ""))
        self.assertEqual(self.complete("tunepack", "export", "--format", ""), ["csv", "json", "tsv"])

    def test_files_for_file_and_directories_for_dir(self):
        os.makedirs(self.path("runs", "mlp"))
        self.write("exp.yaml", "name: x\n")
        self.write("rfile", "")
        self.assertEqual(self.complete("tunepack", "run", "e"), ["exp.yaml"])
        self.assertEqual(self.complete("tunepack", "run", "r"), ["rfile", "runs"])
        self.assertEqual(self.complete("tunepack", "status", "r"), ["runs"])
        self.assertEqual(self.complete("tunepack", "best", "runs/"), ["runs/mlp"])
        self.assertEqual(self.complete("tunepack", "run", "exp.yaml", "--dir", "r"), ["runs"])
        self.assertEqual(self.complete("tunepack", "simulate", "--svg", "e"), ["exp.yaml"])


if __name__ == "__main__":
    main()
