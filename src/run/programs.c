/* programs: what the command of an experiment runs, found as a trial's
 * exec finds it: each program's absolute path (PATH looked up as
 * posix_spawnp does, from the working directory), and for a Python
 * interpreter its version and whether it imports what the script imports
 * at top level. Used by `run --dry-run` and by the program check every
 * run makes before its first trial. Nothing here passes through a shell. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run/orchestrator_internal.h"

#define PROBE_TIMEOUT_S 60    /* importing torch can take seconds; a hang is said */
#define PROBE_OUT_MAX 65536   /* bytes read back from the interpreter */
#define SCRIPT_MAX (4u << 20) /* larger scripts are not read for imports */
#define IMPORTS_MAX 64        /* modules checked per script */

extern char **environ;

/* 0 if path is a regular file we may execute, else -errno. */
static int executable(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -errno;
    if (!S_ISREG(st.st_mode)) return -EISDIR;
    return access(path, X_OK) == 0 ? 0 : -EACCES;
}

/* See orchestrator_internal.h. */
int tp__run_resolve_program(const char *prog, const char *workdir, char *out, size_t n) {
    int rc = -ENOENT;
    if (strchr(prog, '/')) {
        if (prog[0] == '/')
            snprintf(out, n, "%s", prog);
        else
            snprintf(out, n, "%s/%s", workdir, prog);
        return executable(out);
    }
    const char *dirs = getenv("PATH");
    char path[8192];
    for (const char *p = dirs ? dirs : "/bin:/usr/bin"; rc != 0 && *p;) {
        size_t len = strcspn(p, ":");
        if (len == 0) /* an empty entry is the working directory */
            snprintf(path, sizeof path, "%s/%s", workdir, prog);
        else if (*p == '/')
            snprintf(path, sizeof path, "%.*s/%s", (int)len, p, prog);
        else
            snprintf(path, sizeof path, "%s/%.*s/%s", workdir, (int)len, p, prog);
        int here = executable(path);
        if (here == 0 || (here == -EACCES && rc == -ENOENT)) {
            rc = here;
            snprintf(out, n, "%s", path);
        }
        p += len + (p[len] == ':');
    }
    return rc;
}

/* Is the program (a path or a name) a Python interpreter: python,
 * python3, python3.11? */
static int is_python(const char *prog) {
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    if (strncmp(base, "python", 6) != 0) return 0;
    return strspn(base + 6, "0123456789.") == strlen(base + 6);
}

/* Add module name (its text up to len) to mods if new. */
static void add_module(char **mods, size_t *n, const char *name, size_t len) {
    if (len == 0 || *n >= IMPORTS_MAX || name[0] == '.') return; /* relative: the script's own */
    if (len == 10 && !strncmp(name, "__future__", 10)) return;
    for (size_t i = 0; i < *n; i++)
        if (strlen(mods[i]) == len && !strncmp(mods[i], name, len)) return;
    mods[*n] = tp__xmalloc(len + 1);
    memcpy(mods[*n], name, len);
    mods[(*n)++][len] = '\0';
}

static size_t module_len(const char *p) {
    size_t k = 0;
    while (p[k] == '.' || p[k] == '_' || (p[k] >= 'a' && p[k] <= 'z') ||
           (p[k] >= 'A' && p[k] <= 'Z') || (p[k] >= '0' && p[k] <= '9'))
        k++;
    return k;
}

/* The modules the script at path imports at top level (lines that start
 * at column 0 with `import a.b as c, d` or `from x import y`; indented
 * ones, optional or late, are not read). mods gets up to IMPORTS_MAX
 * malloc'd names; returns their count, or -errno if unreadable. O(size). */
static int script_imports(const char *path, char **mods) {
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    size_t n = 0, read = 0;
    char line[4096];
    while (fgets(line, sizeof line, f) && (read += strlen(line)) < SCRIPT_MAX) {
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        if (!strncmp(line, "from ", 5)) {
            char *p = line + 5;
            while (*p == ' ')
                p++;
            add_module(mods, &n, p, module_len(p));
        } else if (!strncmp(line, "import ", 7)) {
            for (char *p = line + 7; p && *p;) {
                while (*p == ' ' || *p == '(')
                    p++;
                add_module(mods, &n, p, module_len(p));
                p = strchr(p, ',');
                if (p) p++;
            }
        }
    }
    fclose(f);
    return (int)n;
}

/* What the interpreter runs: its version, then for each module a line
 * "name<TAB>ok" or "name<TAB>Error: why". Whatever the modules print goes
 * to stderr (discarded): the answers are written on the saved stdout. */
static const char PROBE[] =
    "import importlib, os, sys\n"
    "out = os.dup(1)\n"
    "os.dup2(2, 1)\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "os.write(out, (sys.version.split()[0] + ' ' + sys.executable + '\\n').encode())\n"
    "for m in sys.argv[2:]:\n"
    "    try:\n"
    "        importlib.import_module(m)\n"
    "        r = 'ok'\n"
    "    except BaseException as e:\n"
    "        r = (type(e).__name__ + ': ' + str(e)).replace('\\n', ' ')[:200]\n"
    "    os.write(out, (m + '\\t' + r + '\\n').encode())\n";

/* Run argv (no shell) in cwd with env, its stdout into out (at most
 * PROBE_OUT_MAX bytes), stdin and stderr /dev/null; killed past
 * PROBE_TIMEOUT_S. 0, -ETIMEDOUT or -errno. */
static int probe(char **argv, char **env, const char *cwd, tp_buf_t *out) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addchdir_np(&fa, cwd);
    pid_t pid;
    int rc = -posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return rc;
    }
    double end = tp__mono_s() + PROBE_TIMEOUT_S;
    char buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int left_ms = (int)((end - tp__mono_s()) * 1000);
        if (left_ms <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        int ready = poll(&p, 1, left_ms);
        if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
        if (ready < 0) {
            rc = -errno;
            break;
        }
        ssize_t got = read(fds[0], buf, sizeof buf);
        if (got == 0) break;
        if (got > 0 && out->len + (size_t)got <= PROBE_OUT_MAX)
            tp__buf_append(out, buf, (size_t)got);
    }
    close(fds[0]);
    if (rc == -ETIMEDOUT) kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        continue;
    return rc;
}

/* The environment a trial of x sees here, near enough: this one with the
 * file's `env` on top. Caller frees the array and its strings. */
static char **trial_env(const tp_experiment_t *x) {
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = tp__xcalloc(n + x->nenv + 1, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int overridden = 0;
        for (size_t j = 0; j < x->nenv && !overridden; j++) {
            size_t len = strlen(x->env[j].name);
            overridden = !strncmp(environ[i], x->env[j].name, len) && environ[i][len] == '=';
        }
        if (!overridden) env[k++] = tp__strdup(environ[i]);
    }
    for (size_t j = 0; j < x->nenv; j++) {
        size_t len = strlen(x->env[j].name) + strlen(x->env[j].value) + 2;
        env[k] = tp__xmalloc(len);
        snprintf(env[k++], len, "%s=%s", x->env[j].name, x->env[j].value);
    }
    return env;
}

static void free_strv(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The Python interpreter at python, its script (an argument of x's
 * command, or NULL) and that script's top-level imports: lines into out.
 * Returns how many modules it cannot import. */
static int check_python(const tp_experiment_t *x, const char *python, const char *script,
                        const char *workdir, tp_buf_t *out) {
    char *mods[IMPORTS_MAX];
    int nmods = 0;
    char spath[8192] = "", sdir[8192];
    snprintf(sdir, sizeof sdir, "%s", workdir);
    if (script) {
        if (script[0] == '/')
            snprintf(spath, sizeof spath, "%s", script);
        else
            snprintf(spath, sizeof spath, "%s/%s", workdir, script);
        char *abs = realpath(spath, NULL);
        if (abs) snprintf(spath, sizeof spath, "%s", abs);
        free(abs);
        nmods = script_imports(spath, mods);
        if (nmods < 0) {
            tp__buf_printf(out, "    script %s -> %s: cannot be read (%s)\n", script, spath,
                           strerror(-nmods));
            nmods = 0;
        } else {
            tp__buf_printf(out, "    script %s -> %s\n", script, spath);
            char *slash = strrchr(spath, '/');
            snprintf(sdir, sizeof sdir, "%.*s", (int)(slash ? slash - spath : 0), spath);
        }
    }
    char **argv = tp__xcalloc((size_t)nmods + 5, sizeof *argv);
    argv[0] = (char *)python;
    argv[1] = "-c";
    argv[2] = (char *)PROBE;
    argv[3] = sdir;
    for (int i = 0; i < nmods; i++)
        argv[4 + i] = mods[i];
    char **env = trial_env(x);
    tp_buf_t got;
    tp__buf_init(&got);
    int rc = probe(argv, env, workdir, &got), missing = 0;
    free_strv(env);
    free(argv);
    char *line = got.data, *nl;
    if (rc != 0 || !line || !(nl = strchr(line, '\n'))) {
        tp__buf_printf(out, "    the interpreter did not answer (%s)\n",
                       rc == -ETIMEDOUT ? "no answer in 60 s"
                       : rc             ? strerror(-rc)
                                        : "no output");
    } else {
        *nl = '\0';
        char *exe = strchr(line, ' ');
        if (exe) *exe++ = '\0';
        char *version = tp__escape(line, 0), *path = tp__escape(exe, 0); /* as the trial said */
        tp__buf_printf(out, "    Python %s%s%s%s\n", version, exe ? " (running " : "",
                       exe ? path : "", exe ? ")" : "");
        free(version);
        free(path);
        if (nmods) tp__buf_printf(out, "    top-level imports:\n");
        for (line = nl + 1; (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = '\0';
            char *tab = strchr(line, '\t');
            if (!tab) continue;
            *tab = '\0';
            int ok = !strcmp(tab + 1, "ok");
            missing += !ok;
            char *mod = tp__escape(line, 0), *why = tp__escape(tab + 1, 0);
            tp__buf_printf(out, "      %s: %s\n", mod, ok ? "ok" : why);
            free(mod);
            free(why);
        }
    }
    tp__buf_free(&got);
    for (int i = 0; i < nmods; i++)
        free(mods[i]);
    return missing;
}

/* The script a Python command runs: the first argument after the
 * interpreter's options, or NULL (-c code, -m module, or a placeholder). */
static const char *python_script(char *const *argv, size_t argc, size_t at) {
    for (size_t i = at + 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-c") || !strcmp(a, "-m") || !strcmp(a, "-")) return NULL;
        if (!strcmp(a, "-W") || !strcmp(a, "-X")) {
            i++;
            continue;
        }
        if (a[0] == '-') continue;
        return strchr(a, '{') ? NULL : a;
    }
    return NULL;
}

/* See orchestrator_internal.h. */
int tp__run_describe_programs(const tp_experiment_t *x, const char *workdir, tp_buf_t *out,
                              int *unimportable) {
    *unimportable = 0;
    size_t at = 0;
    for (;;) {
        const char *prog = x->argv[at];
        if (strchr(prog, '{')) {
            tp__buf_printf(out, "  %s: decided per trial (a placeholder)\n", prog);
            return 0;
        }
        char path[8192];
        int rc = tp__run_resolve_program(prog, workdir, path, sizeof path);
        if (rc != 0) return rc;
        tp__buf_printf(out, "  %s -> %s\n", prog, path);
        if (is_python(path)) {
            *unimportable +=
                check_python(x, path, python_script(x->argv, x->argc, at), workdir, out);
            return 0;
        }
        /* env: its NAME=VALUE and options, then the program it runs */
        const char *base = strrchr(path, '/');
        if (strcmp(base ? base + 1 : path, "env") != 0) return 0;
        while (++at < x->argc && (strchr(x->argv[at], '=') || x->argv[at][0] == '-'))
            continue;
        if (at >= x->argc) return 0;
    }
}
