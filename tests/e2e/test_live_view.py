"""The live view in a real terminal (issue 34): `tunepack run` in a tmux pane, read back with
capture-pane. It shows a row per running trial, fits the terminal and is drawn again when the
terminal is resized; a warning printed while it is drawn stays on the screen, above the view,
instead of being drawn over by its next refresh.

The trials wait for a gate file, so the warning (the agent was lost: the test kills it)
comes while the view is shown; the test waits for the run's events, never for a time."""

import os
import shlex
import signal
import subprocess

from helpers import BIN, E2E, PY, children_of, cmdline, main, wait_for, yaml_str

TRIAL = """import json, os, sys, time
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps({'acc': float(sys.argv[1])}) + '\\n').encode())
"""
# An ASHA trial: a step a report up to its budget, then it waits for the gate.
STEPS = """import json, os, sys, time
fd = int(os.environ['TUNEPACK_REPORT_FD'])
for step in range(1, int(sys.argv[2]) + 1):
    os.write(fd, (json.dumps({'step': step, 'acc': float(sys.argv[1])}) + '\\n').encode())
    time.sleep(0.05)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
"""
WAIT = 60


class LiveView(E2E):
    def setUp(self):
        super().setUp()
        # A server of its own per test: the one a test before ended may still be going away.
        self.socket = "tp-live-%d-%d" % (os.getpid(), id(self))
        self.addCleanup(subprocess.run, ["tmux", "-L", self.socket, "kill-server"],
                        capture_output=True)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.socket] + list(args), capture_output=True,
                              text=True, check=True).stdout

    def screen(self):
        """The pane's text as a person sees it (tmux keeps a cleared screen's lines in its
        history: they are not on the screen)."""
        return self.tmux("capture-pane", "-p", "-t", "view")

    def start(self, exp, run_dir):
        self.run_dirs.append(run_dir)
        cmd = "%s run %s --dir %s; echo EXIT=$?; sleep 600" % (
            shlex.quote(BIN), shlex.quote(exp), shlex.quote(run_dir))
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "view", "-x", "150", "-y", "40",
                  cmd)

    def test_asha_progress_counts_rung_steps_and_time_left_comes_from_step_times(self):
        gate, run_dir = self.path("gate"), self.path("run")
        trial = self.write("trial.py", STEPS)
        # (2, 18, 3): rungs 2, 6, 18; 6 trials are expected to run 6 x 2 + 2 x 4 + 2/3 x 12
        # = 28 epochs in all.
        exp = self.experiment(
            "name: live\ncommand: [%s, %s, \"{x}\", \"{epochs}\", %s]\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 6, seed: 1, scheduler: asha}\n"
            "budget: {name: epochs, min: 2, max: 18, eta: 3}\nconcurrency: 2\n"
            % (yaml_str(PY), yaml_str(trial), yaml_str(gate)))
        self.start(exp, run_dir)

        def stepped():
            rows = self.poll_query(run_dir, "SELECT count(*) AS n FROM metrics WHERE step = 2")
            return rows and rows[0]["n"] >= 2
        self.assertTrue(wait_for(stepped, WAIT), self.screen())
        # Both trials ran their rung-0 steps and wait: no trial has ended, yet the progress
        # counts the 4 epochs run and the time left is estimated from their step times.
        line = wait_for(lambda: [l for l in self.screen().splitlines()
                                 if l.startswith("elapsed ") and "work 4/28 epochs" in l], WAIT)
        self.assertTrue(line, self.screen())
        self.assertRegex(line[0], r"remaining ~\d", self.screen())
        self.assertIn("0/6 done", self.screen())
        self.assertIn("[####", self.screen())  # 4/28 of the bar, not 0/6 of it
        with open(gate, "w"):
            pass
        self.assertTrue(wait_for(lambda: "EXIT=" in self.screen(), WAIT), self.screen())
        self.assertIn("EXIT=0", self.screen())

    def test_a_warning_during_the_run_stays_above_the_live_view(self):
        gate, run_dir = self.path("gate"), self.path("run")
        trial = self.write("trial.py", TRIAL)
        exp = self.experiment(
            "name: live\ncommand: [%s, %s, \"{x}\", %s]\nmetric: {name: acc, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\nsearch: {algorithm: random, trials: 4, seed: 1}\n"
            "concurrency: 2\n" % (yaml_str(PY), yaml_str(trial), yaml_str(gate)))
        self.start(exp, run_dir)

        def running():
            rows = self.poll_query(run_dir, "SELECT count(*) AS n FROM events "
                                            "WHERE kind = 'running'")
            return rows and rows[0]["n"] >= 2
        self.assertTrue(wait_for(running, WAIT), self.screen())

        def table(screen):
            """{trial id: its row} from the running trials' table on the screen."""
            lines = screen.splitlines()
            head = [i for i, l in enumerate(lines) if l.split()[:2] == ["trial", "parameters"]]
            if len(head) != 1:
                return {}
            rows = {}
            for l in lines[head[0] + 1:]:
                if not l.strip() or not l.split()[0].isdigit():
                    break
                rows[int(l.split()[0])] = l
            return rows
        # Under the progress lines, a row per running trial: id, parameters, elapsed, where.
        rows = wait_for(lambda: len(table(self.screen())) == 2 and table(self.screen()), WAIT)
        self.assertEqual(sorted(rows), [0, 1], self.screen())
        self.assertIn("x=", rows[0])
        self.assertRegex(rows[0], r"\d+(\.\d+)?s  ")
        # A narrower terminal: the view is drawn again at its width, once (a line wider than
        # the terminal would wrap, and the next redraw would leave a copy behind).
        self.tmux("resize-window", "-t", "view", "-x", "70")

        def fitted():
            text = self.screen()
            lines = [l for l in text.splitlines() if l.strip()]
            return (len(table(text)) == 2 and all(len(l) < 70 for l in lines)
                    and sum(l.startswith("elapsed ") for l in lines) == 1)
        self.assertTrue(wait_for(fitted, WAIT), self.screen())
        orchestrator = self.lock_pid(run_dir)
        agents = [p for p in children_of(orchestrator) if "agent" in cmdline(p)]
        self.assertEqual(len(agents), 1, agents)
        os.kill(agents[0], signal.SIGKILL)
        self.assertTrue(wait_for(lambda: "lost the agent" in self.screen(), WAIT),
                        self.screen())
        # The view goes on refreshing below the warning: the refresh after it must not
        # draw over it (a later "elapsed" line proves a refresh happened).
        with open(gate, "w"):
            pass
        self.assertTrue(wait_for(lambda: "EXIT=" in self.screen(), WAIT), self.screen())
        text = self.screen()
        self.assertIn("EXIT=0", text)
        lines = text.splitlines()
        warn = [i for i, l in enumerate(lines) if l.startswith("tunepack: warn: lost the agent")]
        summary = [i for i, l in enumerate(lines) if l.startswith("live finished after")]
        self.assertEqual(len(warn), 1, text)
        self.assertEqual(len(summary), 1, text)
        self.assertLess(warn[0], summary[0], text)
        # Nothing of the live block is left on the screen once the run ends.
        self.assertFalse(any(l.startswith("elapsed ") for l in lines), text)


if __name__ == "__main__":
    main()
