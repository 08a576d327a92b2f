#!/usr/bin/env python3
"""How values reach a trial: argv placeholders (never a shell), env, params.json."""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import DUMP_TRIAL as DUMP, E2E, PY, main, yaml_str


class Substitution(E2E):

    def setUp(self):
        super().setUp()
        self.dump = self.write("dump.py", DUMP)

    def test_value_with_shell_syntax_reaches_program_as_one_argument(self):
        owned = self.path("owned")
        evil = "x; touch %s" % owned
        evil2 = "$(touch %s)" % owned
        exp = self.experiment(
            "name: subst\n"
            "command: [%s, %s, \"{v}\", \"--flag={v}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  v: {grid: [%s, %s]}\n"
            "search: {algorithm: grid, trials: 1}\n"
            % (PY, yaml_str(self.dump), yaml_str(evil), yaml_str(evil2)))
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        values = set()
        for tid in (0, 1):
            argv = self.seen(run_dir, tid)["argv"]
            # python3 dump.py: argv[0] is the script, then our two arguments, exactly.
            self.assertEqual(len(argv), 3, argv)
            self.assertEqual(argv[2], "--flag=" + argv[1])
            values.add(argv[1])
        self.assertEqual(values, {evil, evil2})
        self.assertFalse(os.path.exists(owned), "a parameter value went through a shell")
        with self.store(run_dir) as s:
            self.assertEqual({t["params"]["v"] for t in s.trials()}, {evil, evil2})
            self.assertEqual({t["state"] for t in s.trials()}, {"completed"})

    def test_env_params_json_trial_id_and_trial_dir(self):
        exp = self.experiment(
            "name: subst-env\n"
            "command: [%s, %s, \"{trial_id}\", \"{trial_dir}\", \"{{lr}}={lr}\", "
            "\"{hidden}\", \"{name}\", \"{drop-out.p}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  lr: {choice: [0.5]}\n"
            "  hidden: {choice: [64]}\n"
            "  name: {choice: [\"a b\"]}\n"
            "  drop-out.p: 0.25\n"
            "search: {algorithm: random, trials: 2, seed: 5}\n"
            % (PY, yaml_str(self.dump)))
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        for tid in (0, 1):
            tdir = os.path.join(run_dir, "trials", "%06d" % tid)
            seen = self.seen(run_dir, tid)
            argv, env = seen["argv"], seen["env"]
            self.assertEqual(argv[1], str(tid))
            self.assertEqual(os.path.realpath(argv[2]), os.path.realpath(tdir))
            self.assertEqual(argv[3], "{lr}=0.5")
            self.assertEqual(argv[4], "64")
            self.assertEqual(argv[5], "a b")
            self.assertEqual(argv[6], "0.25")
            self.assertEqual(env.get("TUNEPACK_PARAM_LR"), "0.5")
            self.assertEqual(env.get("TUNEPACK_PARAM_HIDDEN"), "64")
            self.assertEqual(env.get("TUNEPACK_PARAM_NAME"), "a b")
            self.assertEqual(env.get("TUNEPACK_PARAM_DROP_OUT_P"), "0.25")
            self.assertEqual(env.get("TUNEPACK_TRIAL_ID"), str(tid))
            self.assertEqual(env.get("TUNEPACK_ATTEMPT"), "1")
            self.assertEqual(env.get("TUNEPACK_REPORT_FD"), "3")
            self.assertEqual(os.path.realpath(env.get("TUNEPACK_TRIAL_DIR", "")),
                             os.path.realpath(tdir))
            self.assertTrue(env.get("TUNEPACK_RUN_TOKEN"))
            with open(os.path.join(tdir, "params.json")) as f:
                params = json.load(f)
            # JSON types are kept: numbers stay numbers, strings stay strings.
            self.assertEqual(params, {"lr": 0.5, "hidden": 64, "name": "a b",
                                      "drop-out.p": 0.25})
            self.assertIsInstance(params["hidden"], int)
        with self.store(run_dir) as s:
            token = s.meta()["token"]
            for t in s.trials():
                self.assertEqual(t["state"], "completed")
                self.assertEqual(t["params"], {"lr": 0.5, "hidden": 64, "name": "a b",
                                               "drop-out.p": 0.25})
        self.assertEqual(self.seen(run_dir, 0)["env"]["TUNEPACK_RUN_TOKEN"], token)

    def test_python_dict_and_json_arguments_pass_through_with_placeholders_inside(self):
        # Braces around no parameter name are literal text: a python -c program with dict
        # literals runs as written, {x} inside it is still replaced, {{x}} is the text {x}.
        code = ("import json, os, sys; "
                "os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps({'step': 1, "
                "'acc': float(os.environ['TUNEPACK_PARAM_X']) + {x}}) + chr(10)).encode()); "
                "out = os.path.join(os.environ['TUNEPACK_TRIAL_DIR'], 'seen.json'); "
                "json.dump({'argv': sys.argv}, open(out, 'w'))")
        exp = self.experiment(
            "name: dicts\n"
            "command: [%s, -c, %s, %s, \"{{x}}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space: {x: {grid: [0.25, 0.5]}}\n"
            "search: {algorithm: grid}\n"
            % (PY, yaml_str(code), yaml_str('{"a": [1, {"b": 2} ], "x": {x}}')))
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(len(trials), 2)
        for t in trials:
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["value"], 2 * t["params"]["x"])
            argv = self.seen(run_dir, t["id"])["argv"]
            self.assertEqual(argv[1:], ['{"a": [1, {"b": 2} ], "x": %s}' % t["params"]["x"],
                                        "{x}"])

    def test_misspelt_placeholder_is_rejected_before_any_trial_with_did_you_mean(self):
        exp = self.experiment(
            "name: typo\n"
            "command: [%s, -c, \"print({'step': 1})\", \"{nmae}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space: {name: {choice: [a]}}\n" % PY)
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 3)
        self.assertIn("exp.yaml:2:", r.stderr)
        self.assertIn("placeholder {nmae} names no parameter; did you mean {name}?", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "trials")))

    def test_relative_program_path_resolves_from_run_cwd(self):
        # The program lives in <tmp>/work/bin/trial.py; the run starts in <tmp>/work and the
        # experiment file lives elsewhere, so only the run's cwd can resolve ./bin/trial.py.
        work = self.path("work")
        script = self.write("work/bin/trial.py", "#!%s\n%s" % (PY, DUMP))
        os.chmod(script, 0o755)
        exp = self.experiment(
            "name: relpath\n"
            "command: [./bin/trial.py, \"{x}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  x: {int: [1, 9]}\n"
            "search: {algorithm: random, trials: 1, seed: 1}\n", name="conf/exp.yaml")
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir, cwd=work)
        self.assertExit(r, 0)
        seen = self.seen(run_dir, 0)
        self.assertEqual(os.path.realpath(seen["cwd"]), os.path.realpath(work))
        with self.store(run_dir) as s:
            self.assertEqual(s.trial(0)["state"], "completed")
            self.assertEqual(os.path.realpath(s.meta()["workdir"]), os.path.realpath(work))

    def test_workdir_key_sets_trial_cwd(self):
        # An absolute `workdir:`: trials run there, not in the run's cwd.
        other = self.path("elsewhere")
        os.makedirs(other)
        exp = self.experiment(
            "name: wd\n"
            "command: [%s, %s]\n"
            "metric: {name: acc, mode: max}\n"
            "space: {x: 1}\n"
            "search: {algorithm: random, trials: 1, seed: 1}\n"
            "workdir: %s\n" % (PY, yaml_str(self.dump), yaml_str(other)))
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        self.assertEqual(os.path.realpath(self.seen(run_dir, 0)["cwd"]), other)


if __name__ == "__main__":
    main()
