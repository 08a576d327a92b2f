/* tunepack resize TRIAL GPUS [DIR]: an elastic trial runs on GPUS GPUs from
 * its checkpoint on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

/* A whole number from 0 to max in text into *out; 0 or -1. */
static int whole(const char *text, long max, long *out) {
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < 0 || v > max) return -1;
    *out = v;
    return 0;
}

static int resize_main(int argc, char **argv) {
    const char *dir_arg = NULL;
    char *rest[64] = {argv[0]};
    int n = 1;
    for (int i = 3; i < argc && n < 63; i++)
        rest[n++] = argv[i];
    for (int i = 1; i < argc && i < 3; i++) /* --help, -h, --list-options in TRIAL's place */
        if (argv[i][0] == '-') rest[n++] = argv[i];
    int rc = tp__cli_parse(&tp__cmd_resize, n, rest, NULL, 0, &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    long trial, gpus;
    if (argc < 3) return tp__cli_usage_error(&tp__cmd_resize, "resize needs a TRIAL and GPUS");
    if (whole(argv[1], 1L << 40, &trial) != 0)
        return tp__cli_usage_error(&tp__cmd_resize, "TRIAL must be a trial number, got \"%s\"",
                                   argv[1]);
    if (whole(argv[2], 1024, &gpus) != 0 || gpus < 1)
        return tp__cli_usage_error(&tp__cmd_resize, "GPUS must be a number of GPUs, got \"%s\"",
                                   argv[2]);
    json_t *req = json_pack("{s:s, s:I, s:I}", "op", "resize", "trial", (json_int_t)trial, "gpus",
                            (json_int_t)gpus);
    rc = tp__cli_request(dir_arg, req, "trials are resized");
    json_decref(req);
    return rc;
}

const tp_cmd_t tp__cmd_resize = {
    .name = "resize",
    .summary = "run an elastic trial on another number of GPUs, from its checkpoint",
    .usage = "usage: tunepack resize TRIAL GPUS [DIR]\n\n"
             "Asks the running experiment in DIR (default: the latest under ./runs) to run\n"
             "elastic trial TRIAL (resources: {gpus: {min, max}}) on GPUS GPUs: the trial is\n"
             "asked to checkpoint and exit (a pause request), and runs again from its\n"
             "checkpoint with GPUS GPUs, one process each (WORLD_SIZE, LOCAL_RANK, ...). The\n"
             "resize, its restart cost and the trial's seconds per step at each GPU count are\n"
             "recorded in the store. The orchestrator acts on it within 2 s.\n\n"
             "example:\n  tunepack resize 3 4 runs/big\n",
    .main = resize_main,
};
