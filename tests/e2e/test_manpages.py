#!/usr/bin/env python3
"""Man pages and bash completion: every verb `tunepack --help` lists has a page with the
usual sections that renders without warnings (groff -ww and man --warnings, when here);
every page names tunepack-experiment(5), which documents every key (and every name a key's
value may be) that the loader's tables take (`tunepack __keys`); the completion gives file
names for FILE, directories for DIR and the values of --policy and --format. Each verb's
options against its page, --help and the completion: test_options.py."""

import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import SRC, E2E, main

MAN = os.path.join(SRC, "man")
COMPLETION = os.path.join(SRC, "completion", "tunepack.bash")


class ManPages(E2E):

    def verbs(self):
        p = self.tp("--help")
        self.assertExit(p, 0)
        listed = re.findall(r"^  (\w+) ", p.stdout.split("commands:", 1)[1], re.M)
        self.assertIn("simulate", listed)
        return listed

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
            self.assertIn("tunepack %s" % verb, plain.replace("\n.B ", "\n"))
        top = self.page("tunepack")
        for verb in self.verbs():
            self.assertIn(".B %s\n" % verb, top)

    def test_every_page_names_the_experiment_page_and_no_source_readme(self):
        for name in sorted(os.listdir(MAN)):
            with open(os.path.join(MAN, name)) as f:
                text = f.read()
            self.assertNotIn("README of the tunepack", text, name)
            self.assertNotIn("of the tunepack sources", text, name)
            if name.endswith(".1"):
                see_also = text.split("\n.SH SEE ALSO\n", 1)[1]
                self.assertIn(".BR tunepack\\-experiment (5)", see_also, name)

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
            if name.endswith(".1"):
                self.assertIn("\nEXIT STATUS\n", text)
        man = shutil.which("man")
        if man:  # man-db's own check (its preprocessors, tbl and the like, too)
            for name in sorted(os.listdir(MAN)):
                p = subprocess.run([man, "--warnings", "-l", os.path.join(MAN, name)],
                                   env=dict(os.environ, MANWIDTH="80", MANPAGER="cat",
                                            PAGER="cat"),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 0, name + p.stderr)
                self.assertEqual(p.stderr, "", name)


def plain(roff):
    """roff text with font changes and escapes taken out ("space.\\fINAME\\fB.q" reads
    space.NAME.q)."""
    return re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-").replace("\\&", "")


def experiment_entries(text):
    """The .TP entries of tunepack-experiment.5 in order: (tag, body), the tag being the first
    word of the line after .TP."""
    out = []
    for chunk in re.split(r"^\.TP\n", text, flags=re.M)[1:]:
        tag, _, body = chunk.partition("\n")
        words = re.sub(r"^\.[BI]R? ", "", plain(tag)).split()
        out.append((words[0].strip('"') if words else "", plain(tag + "\n" + body)))
    return out


def experiment_tags(text):
    """The keys tunepack-experiment.5 documents: the tag of each .TP entry."""
    return {tag for tag, _ in experiment_entries(text)}


class ExperimentPage(E2E):
    """tunepack-experiment(5) documents every key the loader takes: the list comes from the
    loader's own tables (`tunepack __keys`), not from a list kept by hand."""

    def keys(self):
        """{path: [the names its value may be]} from `tunepack __keys`, in its order."""
        p = self.tp("__keys")
        self.assertExit(p, 0)
        keys = {}
        for line in p.stdout.splitlines():
            path, _, values = line.partition(" = ")
            keys[path.split()[0]] = values.split()
        self.assertIn("cluster.slurm.nodes.min", keys)
        self.assertIn("asha", keys["search.scheduler"])
        return keys

    def test_documents_each_name_a_keys_value_may_be(self):
        with open(os.path.join(MAN, "tunepack-experiment.5")) as f:
            entries = experiment_entries(f.read())
        keys = self.keys()
        missing = []
        for path, values in keys.items():
            if not values:
                continue
            at = [i for i, (tag, _) in enumerate(entries) if tag == path][0]
            body = entries[at][1]  # and the entries nested under it, up to the next key
            for tag, text in entries[at + 1:]:
                if tag in keys:
                    break
                body += text
            words = set(re.findall(r"[\w-]+", body))
            missing += ["%s: %s" % (path, v) for v in values if v not in words]
        self.assertEqual(missing, [], "names the loader takes that the entry of their key in "
                         "man/tunepack-experiment.5 does not mention")

    def test_documents_every_key_the_loader_takes_and_no_other(self):
        with open(os.path.join(MAN, "tunepack-experiment.5")) as f:
            text = f.read()
        self.assertRegex(text, r'^\.TH TUNEPACK\\-EXPERIMENT 5 "[^"]*" "tunepack [0-9.]+"')
        tags = experiment_tags(text)
        keys = self.keys()
        missing = [k for k in keys if k not in tags]
        self.assertEqual(missing, [], "keys the loader takes (`tunepack __keys`) with no .TP "
                         "entry in man/tunepack-experiment.5")
        tops = {k for k in keys if "." not in k and "[" not in k}
        extra = sorted(t for t in tags if re.split(r"[.\[]", t)[0] in tops and t not in keys)
        self.assertEqual(extra, [], "documented in man/tunepack-experiment.5, but the loader "
                         "takes no such key")
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXAMPLES", "SEE ALSO"):
            self.assertIn("\n.SH " + section + "\n", text)
        self.assertNotIn("README", text)


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

    def test_verbs_complete(self):
        listed = ManPages.verbs(self)
        self.assertEqual(self.complete("tunepack", ""),
                         sorted(listed + ["--help", "--version"]))
        self.assertEqual(self.complete("tunepack", "s"),
                         sorted(v for v in listed if v.startswith("s")))

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
