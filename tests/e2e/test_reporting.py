#!/usr/bin/env python3
"""Reporting: JSON lines on the descriptor, name=value on stdout, and garbage on both."""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str


class Reporting(E2E):

    def run_script(self, code, trials=1, metric="acc", mode="max", extra=""):
        """Run `python3 trial.py` as every trial; return (CompletedProcess, run_dir)."""
        script = self.write("trial.py", "import os, sys\nfd = int(os.environ['TUNEPACK_REPORT_FD'])\n"
                            + code)
        exp = self.experiment(
            "name: rep\n"
            "command: [%s, %s, \"{x}\"]\n"
            "metric: {name: %s, mode: %s}\n"
            "space:\n"
            "  x: {int: [1, 1000]}\n"
            "search: {algorithm: random, trials: %d, seed: 7}\n%s"
            % (PY, yaml_str(script), metric, mode, trials, extra))
        run_dir = self.path("run")
        return self.run_exp(exp, run_dir), run_dir

    def test_json_reports_are_stored_as_metric_rows(self):
        r, run_dir = self.run_script(
            "x = int(sys.argv[1])\n"
            "for step in range(1, 4):\n"
            "    os.write(fd, ('{\"step\": %d, \"acc\": %d, \"loss\": %d}\\n'"
            " % (step, x * step, 10 - step)).encode())\n", trials=2)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            for t in s.trials():
                x = t["params"]["x"]
                self.assertEqual(t["state"], "completed")
                self.assertEqual(t["value"], 3 * x)        # the last report
                self.assertEqual(t["best"], 3 * x)
                self.assertEqual(t["step"], 3)
                self.assertEqual(json.loads(t["metrics"]),
                                 {"step": 3, "acc": 3 * x, "loss": 7})
                rows = s.metrics(t["id"])
                self.assertEqual([(m["attempt"], m["seq"], m["step"], m["value"])
                                  for m in rows],
                                 [(1, 0, 1, x), (1, 1, 2, 2 * x), (1, 2, 3, 3 * x)])
                self.assertEqual(json.loads(rows[1]["data"])["loss"], 8)
                self.assertEqual(s.events(t["id"], "garbage"), [])

    def test_best_tracks_the_best_report_for_mode_min(self):
        r, run_dir = self.run_script(
            "for v in (5, 2, 9):\n"
            "    os.write(fd, ('{\"loss\": %d}\\n' % v).encode())\n",
            metric="loss", mode="min")
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "completed")
            self.assertEqual(t["value"], 9)   # the last value reported
            self.assertEqual(t["best"], 2)    # the best one, for mode min
            self.assertEqual([m["value"] for m in s.metrics(0)], [5, 2, 9])

    def test_stdout_name_value_counts_only_lines_with_the_objective(self):
        r, run_dir = self.run_script(
            "print('loading data... epoch=1 of 3')\n"
            "print('loss=0.5')\n"                        # no objective: just log output
            "print('step=1 acc=0.25 loss=0.4')\n"
            "print('step=2, acc=0.75,loss=0.3')\n"
            "print('lr=0.1 done')\n"
            "sys.stdout.flush()\n")
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "completed")
            self.assertEqual(t["value"], 0.75)
            self.assertEqual(t["step"], 2)
            rows = s.metrics(0)
            self.assertEqual([(m["step"], m["value"]) for m in rows], [(1, 0.25), (2, 0.75)])
            self.assertEqual(json.loads(rows[0]["data"]).get("loss"), 0.4)
        with open(os.path.join(run_dir, "trials", "000000", "stdout.log")) as f:
            self.assertIn("loading data", f.read())

    def test_garbage_on_both_channels_is_recorded_and_trial_still_completes(self):
        r, run_dir = self.run_script(
            "w = lambda b: os.write(fd, b)\n"
            "w(b'{\"acc\": 0.5, \"step\": 1}\\n')\n"
            "w(b'\\x00\\x01\\xff\\xfebinary\\n')\n"
            "w(b'{\"acc\": 0.6\\n')\n"                      # broken JSON
            "w(b'[1, 2, 3]\\n')\n"                          # JSON, not an object
            "w(b'{\"acc\": NaN}\\n')\n"
            "w(b'{\"acc\": Infinity}\\n')\n"
            "w(b'{\"acc\": -Infinity}\\n')\n"
            "w(b'{\"acc\": \"0.9\"}\\n')\n"                 # objective as a string
            "w(b'{\"acc\": null}\\n')\n"
            "w(b'{\"acc\": 0.7, \"step\": \"two\"}\\n')\n"  # step not an integer
            "big = b'{\"acc\": 0.99, \"pad\": \"' + b'x' * (2 << 20) + b'\"}\\n'\n"
            "view = memoryview(big)\n"
            "while view:\n"
            "    view = view[os.write(fd, view):]\n"
            "sys.stdout.buffer.write(b'acc=NaN\\nacc=Infinity\\n')\n"
            "sys.stdout.flush()\n"
            "w(b'{\"acc\": 0.8, \"step\": 2}\\n')\n", trials=2)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            self.assertEqual(s.meta()["state"], "finished")
            for t in s.trials():
                tid = t["id"]
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["value"], 0.8)
                self.assertEqual(t["best"], 0.8)
                self.assertEqual([(m["step"], m["value"]) for m in s.metrics(tid)],
                                 [(1, 0.5), (2, 0.8)])
                details = [g["detail"] or "" for g in s.events(tid, "garbage")]
                # fd: binary, broken, array, NaN, Infinity, -Infinity, string, null,
                # bad step, the 2 MiB line; stdout: NaN, Infinity.
                self.assertEqual(len(details), 12, details)
                self.assertTrue(any("NUL" in d for d in details), details)
                self.assertTrue(any("1 MiB" in d for d in details), details)
                self.assertTrue(any("string" in d for d in details), details)

    def test_binary_and_oversized_stdout_report_lines_are_recorded_as_garbage(self):
        # Lines that carry the objective on stdout but are a NUL-holding line or over 1 MiB
        # are garbage on the stdout channel (docs/reporting.md lists both without
        # restricting them to the descriptor) and must be recorded, not silently dropped.
        r, run_dir = self.run_script(
            "out = sys.stdout.buffer\n"
            "out.write(b'acc=0.5\\n')\n"
            "out.write(b'acc=0.98\\x00\\x00\\n')\n"
            "out.write(b'acc=0.99 pad=' + b'9' * (2 << 20) + b'\\n')\n"
            "out.write(b'acc=0.6\\n')\n"
            "out.flush()\n")
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "completed")
            self.assertEqual([m["value"] for m in s.metrics(0)], [0.5, 0.6])
            details = [g["detail"] or "" for g in s.events(0, "garbage")]
            self.assertEqual(len(details), 2, details)

    def test_exit_zero_without_objective_fails_with_error_naming_the_metric(self):
        r, run_dir = self.run_script(
            "os.write(fd, b'{\"loss\": 0.1, \"step\": 1}\\n')\n"
            "os.write(fd, b'{\"acc\": null}\\n')\n"
            "print('acc is great')\n")
        self.assertExit(r, 5)
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "failed")
            self.assertEqual(t["exit_code"], 0)
            self.assertIsNone(t["value"])
            self.assertIn("acc", t["error"] or "")
            self.assertTrue(s.events(0, "failed"))

    def test_nonzero_exit_after_reporting_is_failed(self):
        r, run_dir = self.run_script(
            "os.write(fd, b'{\"acc\": 0.4}\\n')\n"
            "sys.exit(3)\n")
        self.assertExit(r, 5)
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "failed")
            self.assertEqual(t["exit_code"], 3)
            self.assertTrue(t["error"])


if __name__ == "__main__":
    main()
