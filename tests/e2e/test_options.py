#!/usr/bin/env python3
"""Every option of every verb, checked against one source: the verbs' option tables in
src/cli/cmd_*.c, as `tunepack __options` prints them. Each option a verb accepts is listed in
its --help, tagged in the OPTIONS of its man page and offered by the bash completion (with its
values, when it takes one of a list: `trials --sort`, `export --format`, `--policy`, ...);
and nothing is documented or completed that the verb does not accept. A failure names the
verb, the option and where it is missing or extra."""

import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import SRC, E2E, main

MAN = os.path.join(SRC, "man")
COMPLETION = os.path.join(SRC, "completion", "tunepack.bash")
ALWAYS = {"--help"}  # every verb takes it (tp__cli_parse); not in the tables


def verbs_and_options(tc):
    """{verb: {"hidden": bool, "options": {name: {"switch", "value", "choices", "open",
    "hidden"}}}} from `tunepack __options` (an option may be both a switch and take a value:
    run --dashboard[=HOST:PORT])."""
    p = tc.tp("__options")
    tc.assertExit(p, 0)
    out = {}
    for line in p.stdout.splitlines():
        v = json.loads(line)
        opts = {}
        for o in v["options"]:
            e = opts.setdefault(o["name"], {"switch": False, "value": False, "choices": None,
                                            "open": False, "hidden": o["hidden"]})
            e[o["takes"]] = True
            if o["choices"] is not None:
                e["choices"], e["open"] = o["choices"], o["open"]
        out[v["verb"]] = {"hidden": v["hidden"], "options": opts}
    tc.assertIn("run", out)
    return out


def dashes(text):
    """Long options in text: `--name` tokens (man pages write them \\-\\-name)."""
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text.replace("\\-", "-")))


def man_sections(text):
    """{".SH name": body} of a man page."""
    parts = re.split(r"^\.SH (.+)$", text, flags=re.M)
    return {parts[i].strip('"'): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def tagged(section):
    """The options tagged in a section: the line after each .TP."""
    tags = re.findall(r"^\.TP\n(.*)$", section, re.M)
    return set().union(*(dashes(t) for t in tags)) if tags else set()


class Options(E2E):

    def setUp(self):
        super().setUp()
        self.verbs = verbs_and_options(self)
        self.problems = []

    def miss(self, verb, opt, where):
        self.problems.append("tunepack %s %s: %s" % (verb, opt, where))

    def report(self):
        self.assertEqual(self.problems, [], "\n" + "\n".join(self.problems))

    def visible(self, verb):
        return {n for n, o in self.verbs[verb]["options"].items() if not o["hidden"]}

    def hidden(self, verb):
        return {n for n, o in self.verbs[verb]["options"].items() if o["hidden"]}

    def test_listed_verbs_are_the_tables_verbs(self):
        p = self.tp("--help")
        listed = re.findall(r"^  (\w+) ", p.stdout.split("commands:", 1)[1], re.M)
        self.assertEqual(sorted(listed),
                         sorted(v for v, d in self.verbs.items() if not d["hidden"]))
        with open(COMPLETION) as f:
            m = re.search(r'^_tunepack_verbs="([^"]*)"', f.read(), re.M)
        self.assertEqual(sorted(m.group(1).split()), sorted(listed), COMPLETION)

    def test_help_lists_every_option_and_no_other(self):
        for verb in self.verbs:
            p = self.tp(verb, "--help")
            self.assertExit(p, 0)
            usage = "\n".join(l for l in p.stdout.splitlines() if l.lstrip().startswith(
                ("usage:", "tunepack ")) or l.startswith(" " * 8))
            block = set(re.findall(r"^ {2,}(--[a-z][a-z-]*[a-z])", p.stdout, re.M))
            for opt in sorted(self.visible(verb) - block):
                self.miss(verb, opt, "not in the option list of `tunepack %s --help`" % verb)
            for opt in sorted((block | dashes(usage)) - self.visible(verb) - ALWAYS):
                self.miss(verb, opt, "in `tunepack %s --help`, but %s takes no such option"
                          % (verb, verb))
            for opt in sorted(self.hidden(verb) & dashes(p.stdout)):
                self.miss(verb, opt, "internal, but shown by --help")
        self.report()

    def test_man_page_tags_every_option_and_no_other(self):
        for verb in self.verbs:
            name = "tunepack-%s.1" % verb
            with open(os.path.join(MAN, name)) as f:
                text = f.read()
            sec = man_sections(text)
            tags = tagged(sec.get("OPTIONS", ""))
            for opt in sorted(self.visible(verb) - tags):
                self.miss(verb, opt, "not tagged in OPTIONS of man/%s" % name)
            for opt in sorted(tags - self.visible(verb) - ALWAYS):
                self.miss(verb, opt, "tagged in OPTIONS of man/%s, but %s takes no such option"
                          % (name, verb))
            for opt in sorted(dashes(sec.get("SYNOPSIS", "")) - self.visible(verb) - ALWAYS):
                self.miss(verb, opt, "in the SYNOPSIS of man/%s, but %s takes no such option"
                          % (name, verb))
            for opt in sorted(self.hidden(verb) & dashes(text)):
                self.miss(verb, opt, "internal, but in man/%s" % name)
        self.report()

    def complete(self, *words):
        """COMPREPLY for `tunepack WORDS...`, completing the last word."""
        script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tunepack; '
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        p = subprocess.run(["bash", "-c", script, "complete", COMPLETION, "tunepack"]
                           + list(words), cwd=self.tmp, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return sorted(w for w in p.stdout.split("\n") if w)

    def test_completion_offers_every_option_and_its_values(self):
        where = "completion/tunepack.bash"
        for verb in self.verbs:
            offered = set(self.complete(verb, "--"))
            for opt in sorted(self.visible(verb) - offered):
                self.miss(verb, opt, "not offered by %s after `tunepack %s`" % (where, verb))
            for opt in sorted(offered - self.visible(verb) - ALWAYS):
                self.miss(verb, opt, "offered by %s, but %s takes no such option"
                          % (where, verb))
            for name in sorted(self.visible(verb)):
                o = self.verbs[verb]["options"][name]
                after = self.complete(verb, name, "")
                if o["choices"] is not None and sorted(o["choices"]) != after:
                    self.miss(verb, name, "%s completes its value as %s, the verb takes %s%s"
                              % (where, after, o["choices"],
                                 " (or any other)" if o["open"] else ""))
                if o["value"] and not o["switch"] and self.complete(verb, name, "--"):
                    self.miss(verb, name, "takes a value, but %s offers options after it"
                              % where)
                if o["switch"] and not o["value"] and \
                        set(self.complete(verb, name, "--")) != offered:
                    self.miss(verb, name, "is a switch, but %s does not offer options after it"
                              % where)
        self.report()

    def test_completion_names_no_option_that_does_not_exist(self):
        with open(COMPLETION) as f:
            named = dashes(f.read())
        every = set().union(*(self.visible(v) for v in self.verbs)) | ALWAYS | {"--version"}
        hidden = set().union(*(self.hidden(v) for v in self.verbs))
        for opt in sorted(named - every):
            self.miss("*", opt, "named in completion/tunepack.bash, but no verb takes it"
                      + (" (it is internal)" if opt in hidden else ""))
        self.report()

    def test_closed_choices_are_checked_with_a_suggestion(self):
        p = self.tp("export", "--format", "jsn")
        self.assertExit(p, 2)
        self.assertIn('unknown --format "jsn"; did you mean "json"? (csv, tsv, json)', p.stderr)
        p = self.tp("simulate", "--rounds=ful")
        self.assertExit(p, 2)
        self.assertIn('did you mean "full"?', p.stderr)


if __name__ == "__main__":
    main()
