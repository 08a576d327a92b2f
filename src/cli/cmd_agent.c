/* tunepack agent: the agent process (started by the orchestrator). */
#include <stdio.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "run/run.h"

static int agent_main(int argc, char **argv) {
    const char *extra = NULL;
    int rc = tp__cli_parse(&tp__cmd_agent, argc, argv, NULL, 0, &extra);
    if (rc != TP_CLI_PARSED) return rc;
    if (extra) return tp__cli_usage_error(&tp__cmd_agent, "takes no arguments");
    return tp__agent_main(STDIN_FILENO, STDOUT_FILENO);
}

const tp_cmd_t tp__cmd_agent = {
    .name = "agent",
    .summary = "run as an agent, speaking the protocol on stdin/stdout (internal)",
    .usage = "usage: tunepack agent\n\n"
             "Runs the agent that starts trials on this node; it speaks the protocol of\n"
             "docs/protocol.md on stdin and stdout. The orchestrator starts it; you need not.\n\n"
             "environment:\n"
             "  TUNEPACK_NO_CGROUP=1  make no cgroup per trial, even where one could be made\n"
             "                        (for tests; every process of an attempt still ends\n"
             "                        with it)\n\n"
             "example:\n  tunepack agent < requests > replies\n",
    .main = agent_main,
    .hidden = 1,
};
