/* Unit tests for config: the experiment file, its error messages, and substitution. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "config/config.h"
#include "place/place.h"
#include "tp_test.h"

static const char example[] =
    "name: mlp-demo\n"
    "command: [./build/examples/mlp_train, --lr, \"{lr}\", --hidden, \"{hidden}\", --epochs, "
    "\"{epochs}\"]\n"
    "metric: {name: val_acc, mode: max}\n"
    "space:\n"
    "  lr: {loguniform: [1.0e-4, 1.0]}\n"
    "  momentum: {uniform: [0.0, 0.99]}\n"
    "  hidden: {choice: [16, 32, 64, 128]}\n"
    "  layers: {int: [1, 3]}\n"
    "  epochs: 20\n"
    "search: {algorithm: random, trials: 40, seed: 1}\n"
    "concurrency: 2\n"
    "retries: 1\n"
    "timeout: 5m\n";

/* Parse text expecting failure; returns the message (static buffer). */
static const char *parse_error(const char *text) {
    static tp_error_t err;
    tp_experiment_t x;
    memset(&err, 0, sizeof err);
    int rc = tp__experiment_parse("exp.yaml", text, strlen(text), &x, &err);
    if (rc == 0) {
        tp__experiment_free(&x);
        return "(parsed without error)";
    }
    if (rc != -EINVAL) return "(wrong error code)";
    return err.msg;
}

#define HEAD "name: a\ncommand: [x]\nmetric: {name: v, mode: max}\n"

TP_TEST(test_example_file_parses_into_the_right_fields) {
    tp_experiment_t x;
    tp_error_t err = {0};
    int rc = tp__experiment_parse("exp.yaml", example, strlen(example), &x, &err);
    TP_CHECK_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    TP_CHECK_STR(x.path, "exp.yaml");
    TP_CHECK_STR(x.text, example);
    TP_CHECK_STR(x.name, "mlp-demo");
    TP_CHECK_INT(x.argc, 7);
    TP_CHECK_STR(x.argv[0], "./build/examples/mlp_train");
    TP_CHECK_STR(x.argv[2], "{lr}");
    TP_CHECK(x.argv[7] == NULL);
    TP_CHECK_STR(x.metric, "val_acc");
    TP_CHECK_INT(x.maximize, 1);
    TP_CHECK_INT(x.space.n, 5);
    const tp_param_t *lr = tp__space_find(&x.space, "lr");
    TP_CHECK(lr && lr->kind == TP_DOM_LOGUNIFORM && lr->lo == 1e-4 && lr->hi == 1.0);
    TP_CHECK(lr && lr->line == 5 && lr->col == 3);
    const tp_param_t *m = &x.space.params[1];
    TP_CHECK_STR(m->name, "momentum");
    TP_CHECK(m->kind == TP_DOM_UNIFORM && m->lo == 0.0 && m->hi == 0.99);
    const tp_param_t *h = tp__space_find(&x.space, "hidden");
    TP_CHECK(h && h->kind == TP_DOM_CHOICE && h->nvalues == 4);
    TP_CHECK(h && json_is_integer(h->values[3]) && json_integer_value(h->values[3]) == 128);
    const tp_param_t *l = tp__space_find(&x.space, "layers");
    TP_CHECK(l && l->kind == TP_DOM_INT && l->lo == 1 && l->hi == 3 && !l->log);
    const tp_param_t *e = tp__space_find(&x.space, "epochs");
    TP_CHECK(e && e->kind == TP_DOM_CONST && json_integer_value(e->values[0]) == 20);
    TP_CHECK_STR(x.search.algorithm, "random");
    TP_CHECK_INT(x.search.trials, 40);
    TP_CHECK_INT(x.search.seed, 1);
    TP_CHECK_INT(x.concurrency, 2);
    TP_CHECK_INT(x.retries, 1);
    TP_CHECK_NEAR(x.timeout_s, 300, 1e-9);
    TP_CHECK_NEAR(x.grace_s, 10, 1e-9);
    TP_CHECK_INT(x.log_limit, 8 << 20);
    TP_CHECK(x.workdir == NULL && x.nenv == 0);
    tp__experiment_free(&x);
}

/* Runs the searcher the file describes to exhaustion: how many trials it proposes. */
static uint64_t proposed_trials(const tp_experiment_t *x) {
    tp_error_t err = {0};
    tp_searcher_t *s = tp__searcher_new(&x->space, &x->search, x->maximize, &err);
    if (!s) return 0;
    uint64_t n = 0;
    json_t *cfg;
    while (n < 1000 && s->ops->ask(s, n, 0, &cfg) == 1) {
        json_decref(cfg);
        n++;
    }
    tp__searcher_free(s);
    return n;
}

TP_TEST(test_grid_without_trials_makes_one_pass_and_trials_repeats_it) {
    const char *once = HEAD "space: {a: {grid: [1, 2, 3]}, b: {grid: [x, y]}}\n"
                            "search: {algorithm: grid}\n";
    const char *twice = HEAD "space: {a: {grid: [1, 2, 3]}, b: {grid: [x, y]}}\n"
                             "search: {algorithm: grid, trials: 2}\n";
    const char *random = HEAD "space: {a: {grid: [1, 2, 3]}}\nsearch: {algorithm: random}\n";
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", once, strlen(once), &x, &err), 0);
    TP_CHECK_INT(x.search.trials, 1);
    TP_CHECK_INT(proposed_trials(&x), 6);
    tp__experiment_free(&x);
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", twice, strlen(twice), &x, &err), 0);
    TP_CHECK_INT(x.search.trials, 2);
    TP_CHECK_INT(proposed_trials(&x), 12);
    tp__experiment_free(&x);
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", random, strlen(random), &x, &err), 0);
    TP_CHECK_INT(x.search.trials, 10);
    TP_CHECK_INT(proposed_trials(&x), 10);
    tp__experiment_free(&x);
}

TP_TEST(test_defaults_and_optional_keys) {
    const char *text = HEAD "space:\n"
                            "  n: {int: [1, 1024], log: true, q: 2}\n"
                            "  s: \"20\"\n"
                            "  b: true\n"
                            "  w: {normal: [0, 1], q: 0.5}\n"
                            "stop_grace: 30\n"
                            "log_limit: 64k\n"
                            "workdir: /tmp/run\n"
                            "env: {OMP_NUM_THREADS: 4, MODE: fast}\n"
                            "description: anything\n";
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", text, strlen(text), &x, &err), 0);
    if (err.code) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    TP_CHECK_STR(x.search.algorithm, "random");
    TP_CHECK_INT(x.search.trials, 10);
    TP_CHECK_INT(x.search.seed, 0);
    TP_CHECK_INT(x.concurrency, 1);
    TP_CHECK_INT(x.retries, 0);
    TP_CHECK(x.timeout_s == 0);
    TP_CHECK_NEAR(x.grace_s, 30, 1e-9);
    TP_CHECK_INT(x.log_limit, 65536);
    TP_CHECK_STR(x.workdir, "/tmp/run");
    TP_CHECK_INT(x.nenv, 2);
    TP_CHECK_STR(x.env[0].name, "OMP_NUM_THREADS");
    TP_CHECK_STR(x.env[0].value, "4");
    TP_CHECK_STR(x.env[1].value, "fast");
    const tp_param_t *n = tp__space_find(&x.space, "n");
    TP_CHECK(n && n->kind == TP_DOM_INT && n->log == 1 && n->q == 2);
    const tp_param_t *s = tp__space_find(&x.space, "s");
    TP_CHECK(s && json_is_string(s->values[0])); /* quoted scalars stay strings */
    const tp_param_t *b = tp__space_find(&x.space, "b");
    TP_CHECK(b && json_is_true(b->values[0]));
    const tp_param_t *w = tp__space_find(&x.space, "w");
    TP_CHECK(w && w->kind == TP_DOM_NORMAL && w->hi == 1 && w->q == 0.5);
    tp__experiment_free(&x);
}

TP_TEST(test_yaml_syntax_error_reports_position) {
    TP_CHECK_STR(parse_error("name: a\n  command: [x]\n"),
                 "exp.yaml:2:10: YAML syntax error: mapping values are not allowed in this "
                 "context; check indentation and quoting near here");
    TP_CHECK_CONTAINS(parse_error("name: a\nmetric: {name: v, mode: max\n"),
                      "exp.yaml:3:1: YAML syntax error: did not find expected ',' or '}'");
}

TP_TEST(test_unknown_top_level_key_suggests_the_right_one) {
    TP_CHECK_STR(parse_error(HEAD "concurency: 2\n"),
                 "exp.yaml:4:1: unknown key \"concurency\"; did you mean \"concurrency\"?");
    TP_CHECK_CONTAINS(parse_error(HEAD "zzzzzz: 2\n"),
                      "exp.yaml:4:1: unknown key \"zzzzzz\"; valid keys are: name, description, "
                      "command, metric, space, search");
}

TP_TEST(test_unknown_nested_key_suggests_the_right_one) {
    TP_CHECK_STR(parse_error(HEAD "search: {algoritm: grid}\n"),
                 "exp.yaml:4:10: unknown key \"algoritm\"; did you mean \"algorithm\"?");
    TP_CHECK_STR(parse_error(HEAD "space:\n  lr: {unifrom: [0, 1]}\n"),
                 "exp.yaml:5:8: unknown key \"unifrom\"; did you mean \"uniform\"?");
    TP_CHECK_STR(parse_error("name: a\ncommand: [x]\nmetric: {nme: v, mode: max}\n"),
                 "exp.yaml:3:10: unknown key \"nme\"; did you mean \"name\"?");
}

TP_TEST(test_wrong_type_names_the_key_the_range_and_the_value) {
    TP_CHECK_STR(parse_error(HEAD "concurrency: two\n"),
                 "exp.yaml:4:14: \"concurrency\" must be an integer from 1 to 4096, got \"two\"");
    TP_CHECK_STR(parse_error(HEAD "retries: 101\n"),
                 "exp.yaml:4:10: \"retries\" must be an integer from 0 to 100, got \"101\"");
    TP_CHECK_STR(
        parse_error(HEAD "search: {trials: 0}\n"),
        "exp.yaml:4:18: \"trials\" must be an integer from 1 to 9007199254740992, got \"0\"");
    TP_CHECK_STR(parse_error(HEAD "timeout: 5x\n"),
                 "exp.yaml:4:10: timeout: \"5x\" is not a duration; write e.g. 30s, 5m, 1h30m or "
                 "a number of seconds");
    TP_CHECK_CONTAINS(parse_error(HEAD "log_limit: 1k\n"), "exp.yaml:4:12: \"log_limit\" must be "
                                                           "at least 4k");
    TP_CHECK_CONTAINS(parse_error("name: a\ncommand: [x]\nmetric: {name: v, mode: up}\n"),
                      "exp.yaml:3:25: \"mode\" must be max or min, got \"up\"");
    TP_CHECK_CONTAINS(parse_error("name: my exp\ncommand: [x]\nmetric: {name: v, mode: max}\n"),
                      "exp.yaml:1:7: \"name\" may hold only letters");
    TP_CHECK_CONTAINS(parse_error(HEAD "env: {1X: a}\n"),
                      "exp.yaml:4:7: environment variable name \"1X\" is not valid");
    TP_CHECK_CONTAINS(parse_error(HEAD "space:\n  y: {int: [1, 2.5]}\n"),
                      "exp.yaml:5:16: int bounds of \"y\" must be integers, got \"2.5\"");
}

TP_TEST(test_groups_are_read_and_their_mistakes_point_at_the_key) {
    const char *ok = HEAD "resources: {gpus: 1}\ngroups: {shares: dynamic, min: 0.5, max: 2}\n";
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_REQUIRE(tp__experiment_parse("exp.yaml", ok, strlen(ok), &x, &err) == 0);
    TP_CHECK_INT(x.groups, TP_FLUID_DYNAMIC);
    TP_CHECK(x.groups_min == 0.5 && x.groups_max == 2);
    TP_CHECK_INT(x.groups_restart, 1); /* dynamic shares grow running trials by default */
    TP_CHECK_STR(x.policy, TP_PLACE_GROUPS_POLICY); /* no policy named: the groups' one */
    tp__experiment_free(&x);
    const char *named = HEAD "resources: {gpus: 1}\ngroups: {shares: static}\n"
                             "placement: {policy: bfd}\n";
    TP_REQUIRE(tp__experiment_parse("exp.yaml", named, strlen(named), &x, &err) == 0);
    TP_CHECK_STR(x.policy, "bfd");
    tp__experiment_free(&x);
    const char *held = HEAD "resources: {gpus: 1}\ngroups: {shares: dynamic, restart: false}\n";
    TP_REQUIRE(tp__experiment_parse("exp.yaml", held, strlen(held), &x, &err) == 0);
    TP_CHECK_INT(x.groups_restart, 0);
    tp__experiment_free(&x);
    TP_CHECK_STR(parse_error(HEAD "resources: {gpus: 1}\ngroups: {shares: dynamic, restart: 2}\n"),
                 "exp.yaml:5:36: \"restart\" must be true (a running trial whose share grows to "
                 "more whole GPUs is resized from its checkpoint when that pays) or false (it "
                 "takes its new share at its next attempt), got \"2\"");
    const char *off = HEAD;
    TP_REQUIRE(tp__experiment_parse("exp.yaml", off, strlen(off), &x, &err) == 0);
    TP_CHECK_INT(x.groups, TP_FLUID_OFF);
    TP_CHECK(x.groups_min == 0.25 && x.groups_max == 1);
    TP_CHECK_STR(x.policy, TP_PLACE_DEFAULT_POLICY);
    tp__experiment_free(&x);
    TP_CHECK_STR(parse_error(HEAD "resources: {gpus: 1}\ngroups: {shares: dynamc}\n"),
                 "exp.yaml:5:18: unknown shares \"dynamc\"; did you mean \"dynamic\"?");
    TP_CHECK_CONTAINS(parse_error(HEAD "resources: {gpus: 1}\ngroups: {min: 0.5}\n"),
                      "groups: {shares: dynamic}");
    TP_CHECK_STR(parse_error(HEAD "resources: {gpus: 1}\ngroups: {shares: static, max: 0}\n"),
                 "exp.yaml:5:31: \"max\" must be a number in (0, 16] (a share of GPUs: 0.25 a "
                 "quarter of a GPU, 2 two GPUs), got \"0\"");
    TP_CHECK_STR(
        parse_error(HEAD "resources: {gpus: 1}\ngroups: {shares: static, min: 2, max: 1}\n"),
        "exp.yaml:5:9: groups: min 2 is above max 1");
    TP_CHECK_STR(parse_error(HEAD "groups: {shares: static}\n"),
                 "exp.yaml:4:9: groups share GPUs among a group's trials, which needs resources: "
                 "{gpus: 1} (or {gpus: {min: 1, max: K}}, elastic, for whole GPUs) on one node "
                 "(got 0 GPU(s) on 1 node(s))");
    TP_CHECK_CONTAINS(
        parse_error(HEAD "resources: {gpus: 1}\nsharing: none\ngroups: {shares: static}\n"),
        "exp.yaml:6:9: groups give trials fractions of a GPU, which sharing: none");
}

TP_TEST(test_inverted_range_points_at_the_bounds) {
    TP_CHECK_STR(parse_error(HEAD "space:\n  lr: {uniform: [1, 0.1]}\n"),
                 "exp.yaml:5:17: range of \"lr\" is empty or inverted: [1, 0.1]; write [low, "
                 "high] with low < high");
}

TP_TEST(test_loguniform_bound_must_be_positive) {
    TP_CHECK_STR(parse_error(HEAD "space:\n  lr: {loguniform: [0, 1.0]}\n"),
                 "exp.yaml:5:20: loguniform bound of \"lr\" must be > 0, got 0; use e.g. "
                 "[1.0e-5, 1.0]");
}

TP_TEST(test_empty_choice_is_rejected) {
    TP_CHECK_STR(parse_error(HEAD "space:\n  hidden: {choice: []}\n"),
                 "exp.yaml:5:20: choice for \"hidden\" is empty; list at least one value");
}

TP_TEST(test_unknown_placeholder_points_at_the_command_element) {
    const char *text = "name: a\n"
                       "command: [./train, --lr, \"{lrate}\", --m, \"{momentum}\"]\n"
                       "metric: {name: v, mode: max}\n"
                       "space:\n"
                       "  lr: {uniform: [0, 1]}\n"
                       "  momentum: 0.9\n"
                       "  hidden: {choice: [1, 2]}\n";
    TP_CHECK_STR(parse_error(text), "exp.yaml:2:26: placeholder {lrate} names no parameter; did "
                                    "you mean {lr}? (parameters: lr, momentum, hidden)");
    /* built-ins, escaped braces and braces around no name are fine */
    const char *ok = "name: a\ncommand: [x, \"{trial_id}\", \"{trial_dir}/out\", \"{{lit}}\", "
                     "\"--{a\", \"a}\", \"{ lr }\", \"{'step': 1}\", '{\"a\": [1]}']\n"
                     "metric: {name: v, mode: min}\n";
    TP_CHECK_STR(parse_error(ok), "(parsed without error)");
}

TP_TEST(test_misspelt_placeholder_beside_a_dict_literal_suggests_the_parameter) {
    const char *text = "name: a\n"
                       "command: [python3, -c, \"print({'step': 1})\", \"{nmae}\"]\n"
                       "metric: {name: v, mode: max}\n"
                       "space: {name: {choice: [a, b]}}\n"
                       "budget: {name: epochs, min: 1, max: 9}\n";
    TP_CHECK_STR(parse_error(text), "exp.yaml:2:46: placeholder {nmae} names no parameter; did "
                                    "you mean {name}? (parameters: name)");
    const char *budget = "name: a\n"
                         "command: [x, \"--epochs={epoch}\"]\n"
                         "metric: {name: v, mode: max}\n"
                         "budget: {name: epochs, min: 1, max: 9}\n";
    TP_CHECK_CONTAINS(parse_error(budget), "exp.yaml:2:14: placeholder {epoch} names no "
                                           "parameter; did you mean {epochs}?");
}

TP_TEST(test_bare_list_domain_explains_choice_and_grid) {
    TP_CHECK_STR(parse_error(HEAD "space:\n  hidden: [16, 32]\n"),
                 "exp.yaml:5:11: \"hidden\" is a bare list; use {choice: [...]} to sample from a "
                 "list or {grid: [...]} to try every value");
}

TP_TEST(test_scalar_command_is_rejected_as_never_run_through_a_shell) {
    TP_CHECK_STR(parse_error("name: a\ncommand: python3 train.py --lr 0.1\n"
                             "metric: {name: v, mode: max}\n"),
                 "exp.yaml:2:10: command must be a list of arguments, e.g. [python3, train.py, "
                 "--lr, \"{lr}\"]; it is never run through a shell");
}

TP_TEST(test_missing_metric_is_reported_at_the_top) {
    TP_CHECK_STR(parse_error("name: a\ncommand: [x]\n"),
                 "exp.yaml:1:1: missing required key \"metric\"; add e.g. metric: {name: val_acc, "
                 "mode: max}");
    TP_CHECK_CONTAINS(parse_error("name: a\ncommand: [x]\nmetric: {name: v}\n"),
                      "exp.yaml:3:9: missing required key \"mode\"");
}

TP_TEST(test_structural_errors_empty_duplicate_not_a_mapping) {
    TP_CHECK_CONTAINS(parse_error(""), "exp.yaml:1:1: the file is empty");
    TP_CHECK_CONTAINS(parse_error("# only a comment\n"), "exp.yaml:1:1: the file is empty");
    TP_CHECK_STR(parse_error("name: a\nname: b\n"),
                 "exp.yaml:2:1: duplicate key \"name\"; keep one of them");
    TP_CHECK_CONTAINS(parse_error("- a\n- b\n"), "exp.yaml:1:1: the experiment must be a mapping");
    TP_CHECK_CONTAINS(parse_error(HEAD "space:\n  x: {uniform: [0, 1], int: [1, 2]}\n"),
                      "\"x\" has two domains (uniform and int); keep one");
    TP_CHECK_CONTAINS(parse_error(HEAD "search: {algorithm: rnd}\n"),
                      "exp.yaml:4:21: unknown search algorithm \"rnd\"; did you mean \"random\"?");
}

TP_TEST(test_load_reads_the_file_and_reports_a_missing_one) {
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__experiment_load("/nonexistent/exp.yaml", &x, &err), -ENOENT);
    TP_CHECK_STR(err.msg, "cannot read /nonexistent/exp.yaml: No such file or directory");
    char path[] = "/tmp/tp_test_config_XXXXXX";
    int fd = mkstemp(path);
    TP_CHECK(fd >= 0);
    close(fd);
    TP_CHECK_INT(tp__write_file(path, example, strlen(example), NULL), 0);
    TP_CHECK_INT(tp__experiment_load(path, &x, &err), 0);
    TP_CHECK_STR(x.name, "mlp-demo");
    TP_CHECK_STR(x.text, example);
    TP_CHECK_STR(x.path, path);
    tp__experiment_free(&x);
    unlink(path);
}

TP_TEST(test_substitution_keeps_a_shell_like_value_as_one_literal_string) {
    json_t *params =
        json_pack("{s:s, s:f, s:i}", "name", "x; touch /tmp/owned", "lr", 0.1, "hidden", 64);
    tp_error_t err = {0};
    char *s = tp__substitute("{name}", params, NULL, &err);
    TP_CHECK_STR(s, "x; touch /tmp/owned");
    free(s);
    s = tp__substitute("--lr={lr} --h {hidden}", params, NULL, &err);
    TP_CHECK_STR(s, "--lr=0.1 --h 64");
    free(s);
    tp_subst_extra_t extra = {.trial_id = "17", .trial_dir = "/runs/a/17"};
    s = tp__substitute("{trial_dir}/ckpt-{trial_id}", params, &extra, &err);
    TP_CHECK_STR(s, "/runs/a/17/ckpt-17");
    free(s);
    json_decref(params);
}

TP_TEST(test_double_braces_are_literal_braces) {
    json_t *params = json_pack("{s:i}", "lit", 5);
    tp_error_t err = {0};
    char *s = tp__substitute("{{lit}} {lit} }}{{", params, NULL, &err);
    TP_CHECK_STR(s, "{lit} 5 }{");
    free(s);
    json_decref(params);
}

TP_TEST(test_substitution_rejects_unknown_names) {
    json_t *params = json_pack("{s:i}", "lr", 1);
    tp_error_t err = {0};
    TP_CHECK(tp__substitute("{nope}", params, NULL, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "{nope}");
    TP_CHECK(tp__substitute("{trial_id}", params, NULL, &err) == NULL); /* no extra given */
    char **names = NULL;
    TP_CHECK_INT(tp__template_names("a{x}b{y.z}{{no}}{'q': {1}}", &names, NULL), 2);
    TP_CHECK(names && !strcmp(names[0], "x") && !strcmp(names[1], "y.z") && names[2] == NULL);
    tp__template_names_free(names);
    json_decref(params);
}

/* A configuration that lacks an active parameter its command names (a value
 * lost on the way) is refused, never run without it; an inactive one is left
 * out with its flag. */
TP_TEST(test_argv_is_refused_when_an_active_parameter_has_no_value) {
    const char *text = "name: a\ncommand: [x, --lr, \"{lr}\", --w, \"{w}\"]\n"
                       "metric: {name: v, mode: max}\n"
                       "space:\n  lr: {uniform: [0, 1]}\n  arch: {choice: [a, b]}\n"
                       "  w: {int: [1, 4], when: {arch: b}}\n";
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", text, strlen(text), &x, &err), 0);
    json_t *lost = json_pack("{s:s, s:i}", "arch", "b", "w", 2);
    TP_CHECK(tp__substitute_argv(x.argv, x.argc, &x.space, lost, NULL, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "\"lr\" has no value in this configuration");
    json_t *inactive = json_pack("{s:f, s:s}", "lr", 0.5, "arch", "a");
    json_t *argv = tp__substitute_argv(x.argv, x.argc, &x.space, inactive, NULL, &err);
    TP_CHECK(argv && json_array_size(argv) == 3); /* x --lr 0.5: --w {w} left out */
    json_decref(argv);
    json_decref(inactive);
    json_decref(lost);
    tp__experiment_free(&x);
}

TP_TEST(test_braces_around_no_name_are_literal_text) {
    json_t *params = json_pack("{s:f}", "x", 0.5);
    tp_error_t err = {0};
    static const struct {
        const char *tmpl, *want;
    } cases[] = {
        {"import json; print(json.dumps({'step': 1, 'acc': {x}}))",
         "import json; print(json.dumps({'step': 1, 'acc': 0.5}))"},
        {"{\"a\": [1, {x}]}", "{\"a\": [1, 0.5]}"},
        {"{lr", "{lr"},
        {"}{ x }{", "}{ x }{"},
        {"{1x}{-x}{}", "{1x}{-x}{}"},
        {"{{x}}={x}", "{x}=0.5"},
        {"{{{x}}}", "{0.5}"},
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(cases); i++) {
        char *s = tp__substitute(cases[i].tmpl, params, NULL, &err);
        TP_CHECK_STR(s, cases[i].want);
        free(s);
    }
    json_decref(params);
}

TP_TEST(test_non_finite_numbers_are_refused_where_they_stand) {
    TP_CHECK_STR(parse_error(HEAD "space:\n  lr: {choice: [0.1, .inf]}\n"),
                 "exp.yaml:5:22: \".inf\" is not a finite number; infinities, NaN and numbers "
                 "beyond +-1.8e308 cannot be given to a trial; write a finite number, or quote it "
                 "to mean the text");
    TP_CHECK_CONTAINS(parse_error(HEAD "space:\n  lr: {grid: [.nan]}\n"),
                      "exp.yaml:5:15: \".nan\"");
    TP_CHECK_CONTAINS(parse_error(HEAD "space:\n  lr: 1e999\n"),
                      "exp.yaml:5:7: \"1e999\" is not a finite");
    TP_CHECK_CONTAINS(parse_error(HEAD "space:\n  lr: {uniform: [-.INF, 1]}\n"), "exp.yaml:5:18:");
    /* quoted, it is text */
    tp_experiment_t x;
    tp_error_t err;
    const char *ok = HEAD "space:\n  tag: {choice: [\".inf\", \".nan\"]}\n";
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", ok, strlen(ok), &x, &err), 0);
    tp__experiment_free(&x);
}

TP_TEST(test_nul_byte_in_any_value_is_refused) {
    TP_CHECK_CONTAINS(parse_error(HEAD "space:\n  s: {choice: [\"a\\0b\"]}\n"),
                      "exp.yaml:5:16: the value \"a...\" holds a NUL byte");
    TP_CHECK_CONTAINS(parse_error(HEAD "env: {X: \"\\0\"}\n"), "exp.yaml:4:10:");
}

TP_TEST(test_value_longer_than_the_environment_carries_is_refused_with_the_limit) {
    size_t n = TP_VALUE_MAX + 1;
    char *text = malloc(n + 200);
    int k = snprintf(text, 200, HEAD "space:\n  s: \"");
    memset(text + k, 'x', n);
    strcpy(text + k + n, "\"\n");
    TP_CHECK_CONTAINS(parse_error(text), "exp.yaml:5:6: this value is 65537 bytes long; a value "
                                         "may be at most 65536 bytes");
    text[k + n - 1] = '"'; /* exactly the limit: accepted */
    text[k + n] = '\n';
    text[k + n + 1] = 0;
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", text, strlen(text), &x, &err), 0);
    tp__experiment_free(&x);
    free(text);
}

TP_TEST(test_name_that_is_only_dots_is_refused) {
    TP_CHECK_CONTAINS(parse_error("name: \"..\"\ncommand: [x]\nmetric: {name: v, mode: max}\n"),
                      "exp.yaml:1:7: \"name\" cannot be \"..\"");
    TP_CHECK_CONTAINS(parse_error("name: .\ncommand: [x]\nmetric: {name: v, mode: max}\n"),
                      "cannot be \".\"");
}

TP_TEST(test_permissions_and_env_passthrough_are_read_and_checked) {
    tp_experiment_t x;
    tp_error_t err;
    const char *dflt = HEAD;
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", dflt, strlen(dflt), &x, &err), 0);
    TP_CHECK_INT(x.dir_mode, 0700);
    TP_CHECK_INT(x.file_mode, 0600);
    TP_CHECK(x.env_passthrough == NULL); /* the default: all here, a safe set remotely */
    tp__experiment_free(&x);
    const char *given = HEAD "permissions: group\nenv_passthrough: [PATH, \"LC_*\"]\n";
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", given, strlen(given), &x, &err), 0);
    TP_CHECK_INT(x.dir_mode, 0750);
    TP_CHECK_INT(x.file_mode, 0640);
    TP_CHECK_INT((long long)x.nenv_passthrough, 2);
    TP_CHECK_STR(x.env_passthrough[1], "LC_*");
    tp__experiment_free(&x);
    const char *none = HEAD "env_passthrough: []\n";
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", none, strlen(none), &x, &err), 0);
    TP_CHECK(x.env_passthrough != NULL && x.nenv_passthrough == 0);
    tp__experiment_free(&x);
    TP_CHECK_CONTAINS(parse_error(HEAD "permissions: everyone\n"),
                      "exp.yaml:4:14: \"permissions\" must be private");
    TP_CHECK_CONTAINS(parse_error(HEAD "env_passthrough: [\"A B\"]\n"), "exp.yaml:4:19:");
    TP_CHECK_CONTAINS(parse_error(HEAD "env_passthrough: PATH\n"), "must be a list");
}

TP_TEST(test_deadline_and_reallocation_are_read_with_defaults) {
    tp_experiment_t x;
    tp_error_t err;
    const char *plain = HEAD;
    TP_REQUIRE(tp__experiment_parse("exp.yaml", plain, strlen(plain), &x, &err) == 0);
    TP_CHECK(x.deadline_s == 0);
    TP_CHECK_INT(x.realloc.policy, TP_REALLOC_UNIFORM);
    TP_CHECK_NEAR(x.realloc.min_gain, 1.1, 1e-12);
    TP_CHECK_NEAR(x.realloc.cooldown_s, 60, 1e-12);
    TP_CHECK_NEAR(x.realloc.temperature, 1, 1e-12);
    TP_CHECK_INT(x.realloc.probe, 1);
    TP_CHECK_INT(x.realloc_given, 0);
    tp__experiment_free(&x);
    const char *full = HEAD "deadline: 45m\n"
                            "reallocation: {policy: softmax, min_gain: 1.25, cooldown: 2m, "
                            "temperature: 0.5, probe: false}\n";
    TP_REQUIRE(tp__experiment_parse("exp.yaml", full, strlen(full), &x, &err) == 0);
    TP_CHECK_NEAR(x.deadline_s, 2700, 1e-9);
    TP_CHECK_INT(x.realloc.policy, TP_REALLOC_SOFTMAX);
    TP_CHECK_NEAR(x.realloc.min_gain, 1.25, 1e-12);
    TP_CHECK_NEAR(x.realloc.cooldown_s, 120, 1e-12);
    TP_CHECK_NEAR(x.realloc.temperature, 0.5, 1e-12);
    TP_CHECK_INT(x.realloc.probe, 0);
    TP_CHECK_INT(x.realloc_given, 1);
    tp__experiment_free(&x);
}

TP_TEST(test_bad_deadline_and_reallocation_say_what_and_where) {
    TP_CHECK_CONTAINS(parse_error(HEAD "deadline: soon\n"), "exp.yaml:4:11: deadline: ");
    TP_CHECK_STR(parse_error(HEAD "deadline: 0s\n"),
                 "exp.yaml:4:11: deadline: duration \"0s\" must be greater than zero; write e.g. "
                 "30s");
    TP_CHECK_STR(parse_error(HEAD "reallocation: {policy: top_job}\n"),
                 "exp.yaml:4:24: unknown reallocation policy \"top_job\"; did you mean "
                 "\"top-job\"?");
    TP_CHECK_STR(parse_error(HEAD "reallocation: {min_gain: 0.9}\n"),
                 "exp.yaml:4:26: \"min_gain\" must be a number > 1 (the modelled speed-up a "
                 "resize must beat, e.g. 1.1), got \"0.9\"");
    TP_CHECK_STR(parse_error(HEAD "reallocation: {temperature: 0}\n"),
                 "exp.yaml:4:29: \"temperature\" must be a number > 0 (softmax over scores, e.g. "
                 "1), got \"0\"");
    TP_CHECK_STR(parse_error(HEAD "reallocation: {cooldwn: 1m}\n"),
                 "exp.yaml:4:16: unknown key \"cooldwn\"; did you mean \"cooldown\"?");
    TP_CHECK_CONTAINS(parse_error(HEAD "reallocation: {probe: maybe}\n"),
                      "exp.yaml:4:23: \"probe\" must be true or false");
}

TP_TEST(test_deadline_and_reallocation_may_change_between_runs) {
    tp_buf_t acc, ref;
    tp__buf_init(&acc);
    tp__buf_init(&ref);
    int rc =
        tp__config_changes(HEAD "deadline: 30m\n",
                           HEAD "deadline: 1h\nreallocation: {policy: top-job}\n", 1, &acc, &ref);
    TP_CHECK_INT(rc, 0);
    TP_CHECK_CONTAINS(acc.data, "deadline: \"30m\" -> \"1h\"");
    TP_CHECK_CONTAINS(acc.data, "reallocation: (none) -> {\"policy\":\"top-job\"}");
    tp__buf_free(&acc);
    tp__buf_free(&ref);
}

/* The command may change while no trial has a result (a mistake fixed), shown
 * old and new on a line each; once one has, it is refused like the space. */
TP_TEST(test_command_may_change_only_until_a_trial_has_a_result) {
    static const char old[] = HEAD "space: {x: {uniform: [0, 1]}}\n";
    static const char changed[] = "name: a\ncommand: [y, \"{x}\"]\nmetric: {name: v, mode: max}\n"
                                  "space: {x: {uniform: [0, 1]}}\n";
    tp_buf_t acc, ref;
    tp__buf_init(&acc);
    tp__buf_init(&ref);
    TP_CHECK_INT(tp__config_changes(old, changed, 0, &acc, &ref), 0);
    TP_CHECK_STR(acc.data, "  command: (no trial has a result yet)\n"
                           "    - [\"x\"]\n"
                           "    + [\"y\",\"{x}\"]");
    TP_CHECK_INT((int)ref.len, 0);
    tp__buf_reset(&acc);
    TP_CHECK_INT(tp__config_changes(old, changed, 1, &acc, &ref), 1);
    TP_CHECK_CONTAINS(ref.data, "  command: (trials have results under the old one)");
    TP_CHECK_INT((int)acc.len, 0);
    tp__buf_reset(&ref);
    tp__buf_free(&acc);
    tp__buf_free(&ref);
}

/* `gpus: {min, max}` makes trials elastic; a plain number keeps its meaning. */
TP_TEST(test_elastic_gpus_take_a_min_and_a_max) {
    static const char text[] = HEAD "space: {x: {uniform: [0, 1]}}\n"
                                    "resources: {gpus: {min: 1, max: 8}, gpu_memory: 2G}\n";
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", text, strlen(text), &x, &err), 0);
    TP_CHECK_INT(x.res.gpus, 1);
    TP_CHECK_INT(x.res.gpus_max, 8);
    tp__experiment_free(&x);
    static const char plain[] = HEAD "space: {x: {uniform: [0, 1]}}\nresources: {gpus: 2}\n";
    TP_CHECK_INT(tp__experiment_parse("exp.yaml", plain, strlen(plain), &x, &err), 0);
    TP_CHECK_INT(x.res.gpus, 2);
    TP_CHECK_INT(x.res.gpus_max, 0);
    tp__experiment_free(&x);
    TP_CHECK_STR(parse_error(HEAD "space: {x: {uniform: [0, 1]}}\n"
                                  "resources: {gpus: {min: 4, max: 2}}\n"),
                 "exp.yaml:5:19: an elastic trial's max (2) must be at least its min (4)");
    TP_CHECK_STR(parse_error(HEAD "space: {x: {uniform: [0, 1]}}\n"
                                  "resources: {gpus: {min: 1, mx: 2}}\n"),
                 "exp.yaml:5:28: unknown key \"mx\"; did you mean \"max\"?");
    TP_CHECK_STR(parse_error(HEAD "space: {x: {uniform: [0, 1]}}\n"
                                  "resources: {gpus: {min: 1}}\n"),
                 "exp.yaml:5:19: missing required key \"max\"; add e.g. max: 8");
    TP_CHECK_STR(parse_error(HEAD "space: {x: {uniform: [0, 1]}}\n"
                                  "resources: {gpus: {min: 1, max: 2}, procs_per_node: 2}\n"),
                 "exp.yaml:5:12: an elastic trial (gpus: {min, max}) runs on one node, one "
                 "process per GPU it holds; leave out nodes and procs_per_node");
}

/* A number setting says its key, its range with its open and closed ends, what it means,
 * what it got, and that a quoted number is a string (tp__cfg_get_number). */
TP_TEST(test_number_settings_say_their_range) {
#define PBT HEAD "search: {algorithm: random, trials: 4, scheduler: pbt}\n"
#define QUANTILE "must be a number in (0, 0.5] (a share: the bottom share copies the top share"
    static const struct {
        const char *yaml, *said;
    } cases[] = {
        {PBT "pbt: {perturbation_interval: 0}\n",
         "exp.yaml:5:30: \"perturbation_interval\" must be a number > 0 (budget units between "
         "exploit/explore steps, e.g. 2), got \"0\""},
        {PBT "pbt: {perturbation_interval: 2, quantile: 0.6}\n",
         "exp.yaml:5:43: \"quantile\" " QUANTILE ", e.g. 0.25), got \"0.6\""},
        {PBT "pbt: {perturbation_interval: 2, quantile: \"0.25\"}\n",
         "got \"0.25\" (quoted, so it is a string; remove the quotes)"},
        {PBT "pbt: {perturbation_interval: 2, explore: {x: {resample: 2}}}\n",
         "exp.yaml:5:57: \"resample\" must be a number from 0 to 1 (a probability, e.g. 0.25), "
         "got \"2\""},
        {HEAD "budget: {name: epochs, min: 1, max: 9, eta: 101}\n",
         "exp.yaml:4:45: \"eta\" must be a number in (1, 100] (the reduction factor, e.g. 3), "
         "got \"101\""},
        {HEAD "placement: {oversubscribe: [1]}\n",
         "exp.yaml:4:28: \"oversubscribe\" must be a number from 0 to 4 (0.2 lets each GPU "
         "take 1.2 of compute), got a list"},
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(cases); i++)
        TP_CHECK_CONTAINS(parse_error(cases[i].yaml), cases[i].said);
#undef QUANTILE
#undef PBT
}

TP_TEST(test_pbt_explore_with_takes_perturb_or_pb2) {
#define PBT HEAD "search: {algorithm: random, trials: 4, scheduler: pbt}\n"
    static const char ok[] = PBT "space: {lr: {loguniform: [0.001, 1]}}\n"
                                 "budget: {name: epochs, min: 1, max: 8}\n"
                                 "pbt: {perturbation_interval: 2, explore_with: pb2}\n";
    tp_experiment_t x;
    tp_error_t err = {0};
    TP_REQUIRE(tp__experiment_parse("exp.yaml", ok, strlen(ok), &x, &err) == 0);
    TP_CHECK_INT(x.pbt.pb2, 1);
    tp__experiment_free(&x);
    TP_CHECK_CONTAINS(parse_error(PBT "pbt: {perturbation_interval: 2, explore_with: pb3}\n"),
                      "exp.yaml:5:47: unknown explore_with \"pb3\"; did you mean \"pb2\"?");
    TP_CHECK_CONTAINS(parse_error(PBT "space: {act: {choice: [relu, tanh]}}\n"
                                      "budget: {name: epochs, min: 1, max: 8}\n"
                                      "pbt: {perturbation_interval: 2, explore_with: pb2}\n"),
                      "exp.yaml:7:6: explore_with pb2 chooses numeric parameters, and none is "
                      "explored");
#undef PBT
}

int main(void) {
    return tp_test_main();
}
