/* Tests for proto's typed messages (tp__proto_decode): each kind an agent
 * sends decodes into its struct; a missing member, one of the wrong type and
 * one out of range are errors that name the kind and the member. */
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "tp_test.h"

/* Decode the JSON head `json` as a message; *head keeps the borrowed
 * strings (json_decref it after tp__proto_agent_msg_free). */
static int decode(const char *json, json_t **head, tp_msg_t *m, tp_agent_msg_t *am,
                  tp_error_t *err) {
    *head = json_loads(json, 0, NULL);
    if (!*head) return -999;
    *m = (tp_msg_t){.head = *head,
                    .type = json_string_value(json_object_get(*head, "type")),
                    .payload = "a=1\n",
                    .payload_len = 4};
    memset(err, 0, sizeof *err);
    return tp__proto_decode(m, am, err);
}

TP_TEST(test_hello_decodes_its_node_and_gpus) {
    json_t *h;
    tp_msg_t m;
    tp_agent_msg_t am;
    tp_error_t err;
    TP_REQUIRE(decode("{\"type\": \"hello\", \"protocol\": 1, \"node\": \"n1\", \"cpus\": 8, "
                      "\"memory_mib\": 1024, \"pid\": 42, \"version\": \"0.1\", \"reaped\": 3, "
                      "\"nvml\": \"ok\", \"mps_control\": true, \"gpus\": ["
                      "{\"index\": 0, \"name\": \"H100\", \"uuid\": \"GPU-1\", \"memory_mib\": "
                      "81559, \"memory_used_mib\": 5, \"util\": 7, \"healthy\": true, \"error\": "
                      "\"\"}, {\"index\": 3, \"healthy\": false, \"error\": \"lost\"}]}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_HELLO);
    TP_CHECK_INT(am.hello.protocol, 1);
    TP_CHECK_STR(am.hello.node, "n1");
    TP_CHECK_INT(am.hello.cpus, 8);
    TP_CHECK_INT(am.hello.memory_mib, 1024);
    TP_CHECK_INT(am.hello.reaped, 3);
    TP_CHECK_STR(am.hello.nvml, "ok");
    TP_CHECK_INT(am.hello.mps_control, 1);
    TP_REQUIRE(am.hello.ngpus == 2);
    TP_CHECK_STR(am.hello.gpus[0].name, "H100");
    TP_CHECK_INT(am.hello.gpus[0].memory_mib, 81559);
    TP_CHECK_INT(am.hello.gpus[0].memory_used_mib, 5);
    TP_CHECK_INT(am.hello.gpus[0].util, 7);
    TP_CHECK_INT(am.hello.gpus[0].healthy, 1);
    TP_CHECK_INT(am.hello.gpus[1].index, 3);
    TP_CHECK_INT(am.hello.gpus[1].util, -1); /* absent */
    TP_CHECK(am.hello.gpus[1].name == NULL);
    TP_CHECK_STR(am.hello.gpus[1].error, "lost");
    tp__proto_agent_msg_free(&am);
    json_decref(h);
    /* no NVML: no gpus, no nvml state */
    TP_REQUIRE(decode("{\"type\": \"hello\", \"protocol\": 1, \"node\": \"n\", \"cpus\": 1}", &h,
                      &m, &am, &err) == 0);
    TP_CHECK_INT(am.hello.ngpus, 0);
    TP_CHECK(am.hello.gpus == NULL && am.hello.nvml == NULL);
    tp__proto_agent_msg_free(&am);
    json_decref(h);
}

TP_TEST(test_node_messages_decode) {
    json_t *h;
    tp_msg_t m;
    tp_agent_msg_t am;
    tp_error_t err;
    TP_REQUIRE(decode("{\"type\": \"mps\", \"started\": [0], \"failed\": [{\"index\": 1, "
                      "\"error\": \"no daemon\"}]}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_MPS);
    TP_REQUIRE(am.mps.nfailed == 1);
    TP_CHECK_INT(am.mps.failed[0].index, 1);
    TP_CHECK_STR(am.mps.failed[0].error, "no daemon");
    tp__proto_agent_msg_free(&am);
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"usage\", \"gpus\": [{\"index\": 0, \"memory_mib\": 10, "
                      "\"memory_used_mib\": 4, \"util\": 50, \"healthy\": true, \"error\": \"\", "
                      "\"foreign_mib\": 2, \"foreign\": [7]}], \"trials\": [{\"trial\": 5, "
                      "\"attempt\": 2, \"gpu\": 0, \"pid\": 9, \"used_mib\": 300, \"sm_util\": "
                      "40}]}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_USAGE);
    TP_REQUIRE(am.usage.ngpus == 1 && am.usage.ntrials == 1);
    TP_CHECK_INT(am.usage.gpus[0].foreign_mib, 2);
    TP_CHECK_INT(am.usage.gpus[0].util, 50);
    TP_CHECK_INT(am.usage.gpus[0].healthy, 1);
    TP_CHECK_INT(am.usage.trials[0].trial, 5);
    TP_CHECK_INT(am.usage.trials[0].attempt, 2);
    TP_CHECK_INT(am.usage.trials[0].used_mib, 300);
    TP_CHECK_INT(am.usage.trials[0].sm_util, 40);
    TP_CHECK(am.usage.gpus_json == json_object_get(h, "gpus"));
    tp__proto_agent_msg_free(&am);
    json_decref(h);

    TP_REQUIRE(
        decode("{\"type\": \"error\", \"message\": \"wrong protocol\"}", &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_ERROR);
    TP_CHECK_STR(am.error.message, "wrong protocol");
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"bye\"}", &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_BYE);
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"pong\", \"t\": 12.5}", &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_PONG);
    TP_CHECK_INT(am.pong.has_t, 1);
    TP_CHECK_NEAR(am.pong.t, 12.5, 1e-12);
    json_decref(h);
    TP_REQUIRE(decode("{\"type\": \"pong\"}", &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.pong.has_t, 0);
    json_decref(h);
}

TP_TEST(test_attempt_messages_decode_with_the_attempt_they_are_about) {
    json_t *h;
    tp_msg_t m;
    tp_agent_msg_t am;
    tp_error_t err;
    TP_REQUIRE(decode("{\"type\": \"report\", \"trial\": 4, \"attempt\": 2, \"channel\": "
                      "\"stdout\", \"rank\": 1}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_REPORT);
    TP_CHECK_INT(am.about.trial, 4);
    TP_CHECK_INT(am.about.attempt, 2);
    TP_CHECK_INT(am.about.rank, 1);
    TP_CHECK_INT(am.report.kv, 1);
    TP_CHECK(am.raw == &m && am.raw->payload_len == 4);
    json_decref(h);
    TP_REQUIRE(decode("{\"type\": \"report\", \"trial\": 4, \"attempt\": 2, \"channel\": \"fd\"}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.report.kv, 0);
    TP_CHECK_INT(am.about.rank, 0); /* absent */
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"garbage\", \"trial\": 1, \"attempt\": 1, \"channel\": \"fd\", "
                      "\"what\": \"a line over 1 MiB\"}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_GARBAGE);
    TP_CHECK_STR(am.garbage.what, "a line over 1 MiB");
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"log\", \"trial\": 1, \"attempt\": 1, \"stream\": \"stderr\"}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_LOG);
    TP_CHECK_INT(am.log.is_stderr, 1);
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"started\", \"trial\": 1, \"attempt\": 3, \"pid\": 777, "
                      "\"master_port\": 29500}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_STARTED);
    TP_CHECK_INT(am.started.pid, 777);
    TP_CHECK_INT(am.started.master_port, 29500);
    json_decref(h);

    TP_REQUIRE(decode("{\"type\": \"exited\", \"trial\": 1, \"attempt\": 3, \"status\": "
                      "\"signaled\", \"code\": -1, \"signal\": 9, \"error\": \"\", "
                      "\"duration_s\": 2, \"oom\": false}",
                      &h, &m, &am, &err) == 0);
    TP_CHECK_INT(am.kind, TP_MSG_EXITED);
    TP_CHECK_INT(am.about.attempt, 3);
    TP_CHECK_INT(am.exited.ended, TP_ENDED_SIGNALED);
    TP_CHECK_INT(am.exited.signal, 9);
    TP_CHECK_NEAR(am.exited.duration_s, 2, 1e-12);
    json_decref(h);
}

TP_TEST(test_an_unknown_kind_is_no_error) {
    json_t *h;
    tp_msg_t m;
    tp_agent_msg_t am;
    tp_error_t err;
    TP_CHECK_INT(decode("{\"type\": \"news\", \"trial\": \"x\"}", &h, &m, &am, &err), 0);
    TP_CHECK_INT(am.kind, TP_MSG_UNKNOWN);
    json_decref(h);
}

/* Each malformed message: the error names its kind and the member. */
static const struct bad {
    const char *json;
    const char *says;
} bad[] = {
    /* missing members */
    {"{\"type\": \"hello\", \"node\": \"n\", \"cpus\": 1}",
     "protocol: hello: member \"protocol\" is missing"},
    {"{\"type\": \"hello\", \"protocol\": 1, \"node\": \"n\", \"cpus\": 1, \"gpus\": [{}]}",
     "protocol: hello: member \"gpus[0].index\" is missing"},
    {"{\"type\": \"mps\", \"failed\": [{\"index\": 0}]}",
     "protocol: mps: member \"failed[0].error\" is missing"},
    {"{\"type\": \"usage\", \"gpus\": []}", "protocol: usage: member \"trials\" is missing"},
    {"{\"type\": \"usage\", \"gpus\": [], \"trials\": [{\"trial\": 1, \"attempt\": 1, \"gpu\": "
     "0, \"used_mib\": 3}]}",
     "protocol: usage: member \"trials[0].sm_util\" is missing"},
    {"{\"type\": \"error\"}", "protocol: error: member \"message\" is missing"},
    {"{\"type\": \"report\", \"attempt\": 1, \"channel\": \"fd\"}",
     "protocol: report: member \"trial\" is missing"},
    {"{\"type\": \"report\", \"trial\": 1, \"attempt\": 1}",
     "protocol: report: member \"channel\" is missing"},
    {"{\"type\": \"garbage\", \"trial\": 1, \"attempt\": 1, \"channel\": \"fd\"}",
     "protocol: garbage: member \"what\" is missing"},
    {"{\"type\": \"log\", \"trial\": 1, \"attempt\": 1}",
     "protocol: log: member \"stream\" is missing"},
    {"{\"type\": \"started\", \"trial\": 1, \"attempt\": 1}",
     "protocol: started: member \"pid\" is missing"},
    {"{\"type\": \"exited\", \"trial\": 1}", "protocol: exited: member \"attempt\" is missing"},
    /* wrong types */
    {"{\"type\": \"hello\", \"protocol\": \"1\", \"node\": \"n\", \"cpus\": 1}",
     "protocol: hello: member \"protocol\" must be an integer, not a string"},
    {"{\"type\": \"hello\", \"protocol\": 1, \"node\": \"n\", \"cpus\": 1, \"gpus\": {}}",
     "protocol: hello: member \"gpus\" must be an array, not an object"},
    {"{\"type\": \"hello\", \"protocol\": 1, \"node\": \"n\", \"cpus\": 1, \"gpus\": [{\"index\": "
     "0}, 5]}",
     "protocol: hello: member \"gpus[1]\" must be an object, not an integer"},
    {"{\"type\": \"hello\", \"protocol\": 1, \"node\": \"n\", \"cpus\": 1, \"mps_control\": 1}",
     "protocol: hello: member \"mps_control\" must be a boolean, not an integer"},
    {"{\"type\": \"usage\", \"gpus\": [{\"index\": 0, \"foreign_mib\": 1.5, \"util\": 0, "
     "\"healthy\": true}], \"trials\": []}",
     "protocol: usage: member \"gpus[0].foreign_mib\" must be a non-negative integer, not a real "
     "number"},
    {"{\"type\": \"error\", \"message\": null}",
     "protocol: error: member \"message\" must be a string, not null"},
    {"{\"type\": \"pong\", \"t\": \"now\"}",
     "protocol: pong: member \"t\" must be a number, not a string"},
    {"{\"type\": \"started\", \"trial\": 1.0, \"attempt\": 1, \"pid\": 2}",
     "protocol: started: member \"trial\" must be an integer, not a real number"},
    {"{\"type\": \"exited\", \"trial\": 1, \"attempt\": 1, \"code\": \"3\"}",
     "protocol: exited: member \"code\" must be an integer, not a string"},
    {"{\"type\": \"exited\", \"trial\": 1, \"attempt\": 1, \"oom\": \"yes\"}",
     "protocol: exited: member \"oom\" must be a boolean, not a string"},
    {"{\"type\": \"log\", \"trial\": 1, \"attempt\": 1, \"stream\": [\"stderr\"]}",
     "protocol: log: member \"stream\" must be a string, not an array"},
    /* out of range */
    {"{\"type\": \"exited\", \"trial\": 1, \"attempt\": 1, \"code\": 99999999999}",
     "protocol: exited: member \"code\" is 99999999999, out of range for an integer"},
    {"{\"type\": \"usage\", \"gpus\": [], \"trials\": [{\"trial\": 1, \"attempt\": 1, \"gpu\": "
     "0, \"used_mib\": -4, \"sm_util\": 0}]}",
     "protocol: usage: member \"trials[0].used_mib\" is -4, out of range for a non-negative "
     "integer"},
};

TP_TEST(test_a_malformed_message_names_its_kind_and_member) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *h;
        tp_msg_t m;
        tp_agent_msg_t am;
        tp_error_t err;
        int rc = decode(bad[i].json, &h, &m, &am, &err);
        TP_REQUIRE(rc != -999); /* the test's JSON itself */
        TP_CHECK_INT(rc, -EPROTO);
        TP_CHECK_STR(err.msg, bad[i].says);
        TP_CHECK_INT(am.kind, TP_MSG_UNKNOWN); /* nothing to free, nothing to act on */
        tp__proto_agent_msg_free(&am);
        json_decref(h);
    }
}

TP_TEST(test_exited_alone_keeps_its_defaults_and_checks_types) {
    json_t *h = json_loads("{\"code\": 0}", 0, NULL);
    tp_exited_t e;
    TP_CHECK_INT(tp__proto_exited(h, &e, NULL), 0);
    TP_CHECK_INT(e.ended, TP_ENDED_EXITED);
    TP_CHECK(tp__exited_ok(&e));
    json_decref(h);
    h = json_loads("{\"status\": 3}", 0, NULL);
    tp_error_t err;
    TP_CHECK_INT(tp__proto_exited(h, &e, &err), -EPROTO);
    TP_CHECK_CONTAINS(err.msg, "\"status\" must be a string");
    json_decref(h);
}

int main(void) {
    return tp_test_main();
}
