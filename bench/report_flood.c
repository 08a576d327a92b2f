/* report_flood: writes N JSON report lines to TUNEPACK_REPORT_FD as fast as
 * it can, for bench/engine.py's ingestion figure and bench/dashboard.py's big
 * store. Usage: report_flood N [SCALE] (acc rises to SCALE, default 1). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    double scale = argc > 2 ? atof(argv[2]) : 1.0;
    const char *fd_text = getenv("TUNEPACK_REPORT_FD");
    int fd = fd_text ? atoi(fd_text) : 1;
    FILE *f = fdopen(fd, "w");
    if (!f) return 1;
    static char buf[1 << 16];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    for (long i = 0; i < n; i++)
        fprintf(f, "{\"step\": %ld, \"acc\": %.6f, \"loss\": %.6f}\n", i,
                scale * (double)(i + 1) / (double)n, 1.0 - (double)i / (double)n);
    return fclose(f) == 0 ? 0 : 1;
}
