/* agent: the per-node process that spawns trials (process groups, stdout and
 * stderr capture, report channel, timeouts) and speaks the agent protocol on
 * in_fd/out_fd. It never touches the store. */
#ifndef TP_AGENT_H
#define TP_AGENT_H

/* Run the agent until the orchestrator says "shutdown" or its input closes
 * (then every trial is stopped: SIGTERM, SIGKILL after its grace). Returns
 * the process exit code. */
int tp__agent_main(int in_fd, int out_fd);

#endif
