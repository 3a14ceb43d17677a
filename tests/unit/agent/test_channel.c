/* test_channel.c - the agent with a fake transport and a fake wall clock, driven step by
 * step: heartbeat (properties at the first and every 10th beat), poll cursor, command
 * de-dup through polls, task start/stop at the right times with one finish report, snapshot
 * streaming (decoded), segment reporting with sw8 refs and tags, backend down (poll backoff,
 * finish report kept until the backend is back, never blocking). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/reporter.h"
#include <pthread.h>
#include "common/alloc.h"
#include "common/clock.h"
#include "fakes.h"
#include "harness/skp_alloc_faults.h"
#include "language-agent/Tracing.pb-c.h"
#include "management/Management.pb-c.h"
#include "profile/Profile.pb-c.h"

#define S (1000000000LL)
#define T0 1700000000000LL

struct cenv {
    struct fake_clock clock;
    struct fake_transport ft;
    struct fake_source src;
    skyprof_agent *a;
    int64_t mono;
};

static struct cenv *cenv_new(void)
{
    static struct cenv e;
    memset(&e, 0, sizeof(e));
    fake_clock_init(&e.clock, T0);
    fake_transport_init(&e.ft);
    fake_source_init(&e.src, 3);
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    snprintf(cfg.service, sizeof(cfg.service), "svc");
    snprintf(cfg.instance, sizeof(cfg.instance), "inst-1");
    struct skyprof_kv props[] = {{"team", "payments"}};
    cfg.properties = props;
    cfg.n_properties = 1;
    struct skp__transport tr = fake_transport_vtable(&e.ft);
    struct skyprof_stack_source vt = fake_source_vtable(&e.src);
    assert_int_equal(skp__agent_new(&cfg, &vt, &tr, &e.clock.clock, &e.a), SKP_OK);
    e.mono = 100 * S;
    return &e;
}

static void cenv_free(struct cenv *e)
{
    skp__agent_free(e->a);
    fake_transport_cleanup(&e->ft);
}

/* advances both clocks by `ms` and runs one channel step */
static void step(struct cenv *e, int64_t ms)
{
    fake_clock_advance(&e->clock, ms);
    e->mono += ms * 1000000LL;
    (void)skp__channel_step(e->a, e->mono, false, 1000);
}

static ProtobufCMessage *unpack_call(struct cenv *e, int i, const ProtobufCMessageDescriptor *d)
{
    return protobuf_c_message_unpack(d, NULL, e->ft.calls[i].req_len, e->ft.calls[i].req);
}

static void test_heartbeat_properties_every_10th(void **state)
{
    (void)state;
    struct cenv *e = cenv_new();
    step(e, 0);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_PROPERTIES), 1);
    /* the first keepAlive goes out at once, right after the properties */
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_KEEPALIVE), 1);
    /* the properties carry language, Process No. and the user's extra property */
    for (int i = 0; i < e->ft.n_calls; i++) {
        if (strcmp(e->ft.calls[i].path, SKP_PATH_PROPERTIES) != 0)
            continue;
        Skywalking__V3__InstanceProperties *p =
            (void *)unpack_call(e, i, &skywalking__v3__instance_properties__descriptor);
        assert_string_equal(p->service, "svc");
        assert_string_equal(p->serviceinstance, "inst-1");
        int found = 0;
        for (size_t k = 0; k < p->n_properties; k++) {
            if (!strcmp(p->properties[k]->key, "language"))
                found += !strcmp(p->properties[k]->value, "C");
            if (!strcmp(p->properties[k]->key, "team"))
                found += !strcmp(p->properties[k]->value, "payments");
            if (!strcmp(p->properties[k]->key, "Process No."))
                found++;
        }
        assert_int_equal(found, 3);
        protobuf_c_message_free_unpacked(&p->base, NULL);
    }
    for (int i = 0; i < 9; i++)
        step(e, 30000);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_KEEPALIVE), 10);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_PROPERTIES), 1);
    step(e, 30000);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_PROPERTIES), 2);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_KEEPALIVE), 11);
    cenv_free(e);
}

static int64_t last_poll_cursor(struct cenv *e)
{
    for (int i = e->ft.n_calls - 1; i >= 0; i--) {
        if (strcmp(e->ft.calls[i].path, SKP_PATH_GET_TASKS) != 0)
            continue;
        Skywalking__V3__ProfileTaskCommandQuery *q =
            (void *)unpack_call(e, i, &skywalking__v3__profile_task_command_query__descriptor);
        int64_t c = q->lastcommandtime;
        assert_string_equal(q->service, "svc");
        assert_string_equal(q->serviceinstance, "inst-1");
        protobuf_c_message_free_unpacked(&q->base, NULL);
        return c;
    }
    fail_msg("no poll");
    return 0;
}

static void answer(struct cenv *e, Skywalking__V3__Command **cmds, size_t n)
{
    Skywalking__V3__Commands c = SKYWALKING__V3__COMMANDS__INIT;
    c.n_commands = n;
    c.commands = cmds;
    fake_transport_answer_tasks(&e->ft, &c);
}

static void test_poll_cursor_task_lifecycle_snapshots(void **state)
{
    (void)state;
    struct cenv *e = cenv_new();
    step(e, 0);
    assert_int_equal(last_poll_cursor(e), -1);
    char start[32], create[32];
    snprintf(start, sizeof(start), "%lld", (long long)(T0 + 20000 + 5000));
    snprintf(create, sizeof(create), "%lld", (long long)(T0 + 10000));
    Skywalking__V3__Command *c =
        make_task_command("serial-1", "task-77", "/ep", "1", "0", "10", "5", start, create);
    answer(e, &c, 1);
    step(e, 20000); /* second poll gets the task; it starts 5 s later */
    assert_int_equal(e->a->ts.n_accepted, 1);
    assert_false(skyprof_agent_task_active(e->a));
    step(e, 5000);
    assert_true(skyprof_agent_task_active(e->a));
    step(e, 15000); /* the next poll carries the cursor */
    assert_int_equal(last_poll_cursor(e), T0 + 10000);
    /* the same command again (serial seen): duplicate, nothing new */
    answer(e, &c, 1);
    step(e, 20000);
    struct skyprof_stats st;
    skyprof_agent_get_stats(e->a, &st);
    assert_int_equal(st.commands_duplicate, 1);
    assert_int_equal(st.tasks_accepted, 1);
    free_command(c);

    /* a request takes a slot; dumps are driven directly (bench hook) */
    struct skp__profiling_ref r;
    assert_true(skp__task_ctx_attempt(&e->a->hub->ctx, "/ep", "seg-1", skp__now_ms(&e->clock.clock),
                                      1, &r));
    skp__sampler_stop(&e->a->sampler); /* keep the test deterministic: no sampler thread */
    fake_clock_advance(&e->clock, 1);  /* running longer than the threshold (0 ms) */
    for (int i = 0; i < 3; i++)
        assert_int_equal(skyprof_agent_sample_now(e->a), SKP_OK);
    skp__task_ctx_release(&r);
    step(e, 500);
    int snaps = 0;
    for (int i = 0; i < e->ft.n_stream_msgs; i++) {
        if (strcmp(e->ft.stream_paths[i], SKP_PATH_COLLECT_SNAPSHOT) != 0)
            continue;
        Skywalking__V3__ThreadSnapshot *s = skywalking__v3__thread_snapshot__unpack(
            NULL, e->ft.stream_lens[i], e->ft.stream_msgs[i]);
        assert_string_equal(s->taskid, "task-77");
        assert_string_equal(s->tracesegmentid, "seg-1");
        assert_int_equal(s->sequence, snaps);
        assert_int_equal(s->stack->n_codesignatures, 3);
        assert_string_equal(s->stack->codesignatures[0], "f0"); /* root first */
        assert_string_equal(s->stack->codesignatures[2], "f2");
        skywalking__v3__thread_snapshot__free_unpacked(s, NULL);
        snaps++;
    }
    assert_int_equal(snaps, 3);
    skyprof_agent_get_stats(e->a, &st);
    assert_int_equal(st.snapshots_sent, 3);

    /* task ends one minute after StartTime: exactly one finish report */
    step(e, 60000);
    assert_false(skyprof_agent_task_active(e->a));
    step(e, 1000);
    step(e, 60000);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_TASK_FINISH), 1);
    for (int i = 0; i < e->ft.n_calls; i++) {
        if (strcmp(e->ft.calls[i].path, SKP_PATH_TASK_FINISH) != 0)
            continue;
        Skywalking__V3__ProfileTaskFinishReport *f =
            (void *)unpack_call(e, i, &skywalking__v3__profile_task_finish_report__descriptor);
        assert_string_equal(f->taskid, "task-77");
        assert_string_equal(f->serviceinstance, "inst-1");
        protobuf_c_message_free_unpacked(&f->base, NULL);
    }
    cenv_free(e);
}

/* Through the whole agent and onto the wire: under a task's threshold a request is sampled from
 * its start; when it passes, its held dumps go out first, as ordinary ThreadSnapshots with their
 * own times and sequence numbers; a request that ends under the threshold sends nothing. */
static void test_threshold_held_dumps_on_the_wire(void **state)
{
    (void)state;
    struct cenv *e = cenv_new();
    step(e, 0);
    struct skyprof_task_spec spec = {"task-thr", "/ep", 1, 100, 10, 5, 0};
    assert_int_equal(skyprof_agent_add_task(e->a, &spec), SKP_OK);
    assert_true(skyprof_agent_task_active(e->a));
    /* the sampler thread started with holds; drive it by hand from here (bench hook) */
    skp__sampler_stop(&e->a->sampler);
    skp__sampler_task_begin(&e->a->sampler, 10);
    struct skp__profiling_ref fast, slow;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->a->hub->ctx, "/ep", "fast", t0, 1, &fast));
    assert_true(skp__task_ctx_attempt(&e->a->hub->ctx, "/ep", "slow", t0, 1, &slow));
    for (int i = 0; i < 3; i++) { /* dumps at t0, t0 + 40, t0 + 80: under the threshold */
        assert_int_equal(skyprof_agent_sample_now(e->a), SKP_OK);
        fake_clock_advance(&e->clock, 40);
    }
    skp__task_ctx_release(&fast); /* ends at 120 ms, under the threshold */
    step(e, 500);                 /* nothing to send yet */
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_COLLECT_SNAPSHOT), 0);
    int64_t passed = skp__now_ms(&e->clock.clock); /* t0 + 620: slow passes */
    assert_int_equal(skyprof_agent_sample_now(e->a), SKP_OK);
    skp__task_ctx_release(&slow);
    step(e, 500);
    const int64_t want_t[4] = {t0, t0 + 40, t0 + 80, passed};
    int snaps = 0;
    for (int i = 0; i < e->ft.n_stream_msgs; i++) {
        if (strcmp(e->ft.stream_paths[i], SKP_PATH_COLLECT_SNAPSHOT) != 0)
            continue;
        Skywalking__V3__ThreadSnapshot *s = skywalking__v3__thread_snapshot__unpack(
            NULL, e->ft.stream_lens[i], e->ft.stream_msgs[i]);
        assert_non_null(s);
        assert_string_equal(s->taskid, "task-thr");
        assert_string_equal(s->tracesegmentid, "slow");
        assert_true(snaps < 4);
        assert_int_equal(s->sequence, snaps);
        assert_int_equal(s->time, want_t[snaps]);
        skywalking__v3__thread_snapshot__free_unpacked(s, NULL);
        snaps++;
    }
    assert_int_equal(snaps, 4);
    struct skyprof_stats st;
    skyprof_agent_get_stats(e->a, &st);
    assert_int_equal(st.snapshots_sent, 4);
    assert_int_equal(st.snapshots_captured, 7); /* 3 of them held for fast, then freed */
    assert_int_equal(st.snapshots_dropped, 0);
    assert_int_equal(atomic_load(&e->a->sampler.held_discarded), 3);
    cenv_free(e);
}

static void test_backend_down(void **state)
{
    (void)state;
    struct cenv *e = cenv_new();
    e->ft.down = true;
    step(e, 0);
    assert_int_equal(e->ft.n_calls, 0);
    /* polls back off: 1, 2, 4, 8 s ... (capped at the poll interval) */
    int64_t next = skp__channel_step(e->a, e->mono, false, 1000);
    assert_true(next <= e->mono + 2 * S);
    /* a local task runs and ends while the backend is down; the finish report waits */
    struct skyprof_task_spec spec = {"local-down", "/ep", 1, 0, 10, 5, 0};
    assert_int_equal(skyprof_agent_add_task(e->a, &spec), SKP_OK);
    assert_true(skyprof_agent_task_active(e->a));
    /* requests keep working and the snapshot queue stays bounded */
    struct skp__profiling_ref r;
    assert_true(
        skp__task_ctx_attempt(&e->a->hub->ctx, "/ep", "seg", skp__now_ms(&e->clock.clock), 1, &r));
    skp__sampler_stop(&e->a->sampler);
    fake_clock_advance(&e->clock, 1);
    for (int i = 0; i < 5000; i++)
        assert_int_equal(skyprof_agent_sample_now(e->a), SKP_OK);
    skp__task_ctx_release(&r);
    struct skyprof_stats st;
    skyprof_agent_get_stats(e->a, &st);
    assert_int_equal(st.snapshots_captured, 5000);
    assert_true(st.snapshots_dropped >= 500); /* buffer 4500 */
    for (int i = 0; i < 70; i++)
        step(e, 1000);
    assert_false(skyprof_agent_task_active(e->a));
    assert_int_equal(e->a->n_finish, 1);
    assert_int_equal(e->ft.n_calls, 0);
    /* backend back: properties, poll, snapshots, finish */
    e->ft.down = false;
    for (int i = 0; i < 40; i++)
        step(e, 1000);
    assert_int_equal(fake_transport_count(&e->ft, SKP_PATH_TASK_FINISH), 1);
    assert_true(fake_transport_count(&e->ft, SKP_PATH_PROPERTIES) >= 1);
    assert_true(fake_transport_count(&e->ft, SKP_PATH_GET_TASKS) >= 1);
    skyprof_agent_get_stats(e->a, &st);
    assert_int_equal(st.snapshots_sent, 4500);
    assert_int_equal(e->a->n_finish, 0);
    cenv_free(e);
}

static void test_segments_reported(void **state)
{
    (void)state;
    struct cenv *e = cenv_new();
    struct skp__tracer_conf *conf = skpx_calloc(1, sizeof(*conf));
    conf->epoch = 424242;
    snprintf(conf->service, sizeof(conf->service), "svc");
    snprintf(conf->instance, sizeof(conf->instance), "inst-1");
    snprintf(conf->id_prefix, sizeof(conf->id_prefix), "abcdef");
    conf->profile_active = true;
    conf->report_segments = true;
    conf->segment_limit = 100;
    assert_int_equal(skp__hub_publish(conf), SKP_OK);

    struct skyprof_sw8 in = {1,       "trace-xyz", "parent-seg", 3,
                             "front", "front-1",   "/home",      "svc:80"};
    char hdr[SKYPROF_SW8_MAX];
    assert_true(skyprof_sw8_format(&in, hdr, sizeof(hdr)) > 0);
    skyprof_span *entry = skyprof_entry_begin("/ep", hdr);
    assert_non_null(entry);
    assert_string_equal(skyprof_current_trace_id(), "trace-xyz");
    skyprof_span_add_tag(entry, "http.method", "GET");
    skyprof_span *exit_span = skyprof_span_begin(SKYPROF_SPAN_EXIT, "SELECT", "db:5432");
    skyprof_span_set_layer(exit_span, SKYPROF_LAYER_DATABASE);
    skyprof_span_set_error(exit_span, true);
    char out[SKYPROF_SW8_MAX];
    assert_true(skyprof_sw8_inject(out, sizeof(out)) > 0);
    struct skyprof_sw8 parsed;
    char store[1024];
    assert_int_equal(skyprof_sw8_parse(out, &parsed, store, sizeof(store)), SKP_OK);
    assert_string_equal(parsed.trace_id, "trace-xyz");
    assert_string_equal(parsed.parent_segment_id, skyprof_current_segment_id());
    assert_int_equal(parsed.parent_span_id, 1);
    assert_string_equal(parsed.parent_service, "svc");
    assert_string_equal(parsed.parent_endpoint, "/ep");
    assert_string_equal(parsed.peer, "db:5432");
    skyprof_span_end(exit_span);
    skyprof_entry_end(entry);
    assert_null(skyprof_current_segment_id());
    /* a segment with a malformed sw8 header starts a new trace */
    skyprof_span *e2 = skyprof_entry_begin("/ep2", "garbage");
    assert_non_null(e2);
    assert_string_not_equal(skyprof_current_trace_id(), "trace-xyz");
    skyprof_entry_end(e2);

    step(e, 1000);
    int segs = 0;
    for (int i = 0; i < e->ft.n_stream_msgs; i++) {
        if (strcmp(e->ft.stream_paths[i], SKP_PATH_SEGMENTS) != 0)
            continue;
        Skywalking__V3__SegmentObject *so = skywalking__v3__segment_object__unpack(
            NULL, e->ft.stream_lens[i], e->ft.stream_msgs[i]);
        assert_string_equal(so->service, "svc");
        assert_string_equal(so->serviceinstance, "inst-1");
        if (segs == 0) {
            assert_string_equal(so->traceid, "trace-xyz");
            assert_int_equal(so->n_spans, 2);
            Skywalking__V3__SpanObject *s0 = so->spans[0];
            assert_int_equal(s0->spanid, 0);
            assert_int_equal(s0->parentspanid, -1);
            assert_string_equal(s0->operationname, "/ep");
            assert_int_equal(s0->spantype, SKYWALKING__V3__SPAN_TYPE__Entry);
            assert_int_equal(s0->n_refs, 1);
            assert_string_equal(s0->refs[0]->parenttracesegmentid, "parent-seg");
            assert_int_equal(s0->refs[0]->parentspanid, 3);
            assert_string_equal(s0->refs[0]->parentendpoint, "/home");
            assert_int_equal(s0->n_tags, 1);
            assert_string_equal(s0->tags[0]->key, "http.method");
            Skywalking__V3__SpanObject *s1 = so->spans[1];
            assert_int_equal(s1->parentspanid, 0);
            assert_int_equal(s1->spantype, SKYWALKING__V3__SPAN_TYPE__Exit);
            assert_int_equal(s1->spanlayer, SKYWALKING__V3__SPAN_LAYER__Database);
            assert_true(s1->iserror);
            assert_string_equal(s1->peer, "db:5432");
            assert_true(s1->endtime >= s1->starttime);
        } else {
            assert_string_equal(so->spans[0]->operationname, "/ep2");
            assert_int_equal(so->spans[0]->n_refs, 0);
        }
        skywalking__v3__segment_object__free_unpacked(so, NULL);
        segs++;
    }
    assert_int_equal(segs, 2);
    assert_int_equal(atomic_load(&e->a->segments_sent), 2);
    /* tracing switched off: entry_begin returns NULL and everything accepts NULL */
    assert_int_equal(skp__hub_publish(NULL), SKP_OK);
    skyprof_span *none = skyprof_entry_begin("/x", NULL);
    assert_null(none);
    skyprof_span_add_tag(none, "a", "b");
    skyprof_entry_end(none);
    assert_int_equal(skyprof_sw8_inject(out, sizeof(out)), -1);
    cenv_free(e);
}

/* Request contexts (asyncio): two requests interleaved on one thread, each in its own context,
 * make two segments of one entry span each; the thread's own state stays idle. */
static void test_contexts_interleave(void **state)
{
    (void)state;
    struct cenv *e = cenv_new();
    struct skp__tracer_conf *conf = skpx_calloc(1, sizeof(*conf));
    conf->epoch = 434343;
    snprintf(conf->service, sizeof(conf->service), "svc");
    snprintf(conf->instance, sizeof(conf->instance), "inst-1");
    snprintf(conf->id_prefix, sizeof(conf->id_prefix), "abcdef");
    conf->report_segments = true;
    conf->segment_limit = 100;
    assert_int_equal(skp__hub_publish(conf), SKP_OK);

    skyprof_context *ca = skyprof_context_new();
    skyprof_context *cb = skyprof_context_new();
    assert_non_null(ca);
    assert_non_null(cb);
    skyprof_context *own = skyprof_context_swap(ca);
    assert_non_null(own);
    skyprof_span *sa = skyprof_entry_begin("/a", NULL);
    assert_non_null(sa);
    char seg_a[64];
    snprintf(seg_a, sizeof(seg_a), "%s", skyprof_current_segment_id());
    assert_ptr_equal(skyprof_context_swap(own), ca);
    assert_null(skyprof_current_segment_id()); /* the thread's own state: no request */
    assert_ptr_equal(skyprof_context_swap(cb), own);
    skyprof_span *sb = skyprof_entry_begin("/b", NULL); /* a segment, not a span nested in /a */
    assert_non_null(sb);
    assert_string_not_equal(skyprof_current_segment_id(), seg_a);
    skyprof_entry_end(sa); /* a span of another context: ignored here */
    assert_non_null(skyprof_current_segment_id());
    (void)skyprof_context_swap(ca);
    assert_string_equal(skyprof_current_segment_id(), seg_a);
    skyprof_entry_end(sa);
    assert_null(skyprof_current_segment_id());
    (void)skyprof_context_swap(cb);
    skyprof_entry_end(sb);
    (void)skyprof_context_swap(NULL); /* NULL: back to the thread's own */
    assert_null(skyprof_current_segment_id());
    skyprof_context_free(ca);
    skyprof_context_free(cb);

    step(e, 1000);
    int segs = 0;
    bool saw_a = false;
    bool saw_b = false;
    for (int i = 0; i < e->ft.n_stream_msgs; i++) {
        if (strcmp(e->ft.stream_paths[i], SKP_PATH_SEGMENTS) != 0)
            continue;
        Skywalking__V3__SegmentObject *so = skywalking__v3__segment_object__unpack(
            NULL, e->ft.stream_lens[i], e->ft.stream_msgs[i]);
        assert_int_equal(so->n_spans, 1);
        saw_a = saw_a || strcmp(so->spans[0]->operationname, "/a") == 0;
        saw_b = saw_b || strcmp(so->spans[0]->operationname, "/b") == 0;
        skywalking__v3__segment_object__free_unpacked(so, NULL);
        segs++;
    }
    assert_int_equal(segs, 2);
    assert_true(saw_a && saw_b);
    assert_int_equal(skp__hub_publish(NULL), SKP_OK);
    cenv_free(e);
}

/* --- allocation faults: every allocation of these paths fails in turn ----------------------- */
static void *begin_in_new_thread(void *arg)
{
    (void)arg;
    return skyprof_entry_begin("/ep", NULL); /* its segment buffer cannot be allocated */
}

/* test_alloc_faults' bodies, run once per allocation by skp_test_alloc_faults. */
struct agent_new_ctx {
    const struct skyprof_config *cfg;
    const struct skyprof_stack_source *vt;
    const struct skp__transport *tr;
    const struct skp__clock *clock;
};

static skp_err agent_new_body(void *ctx, long k)
{
    (void)k;
    struct agent_new_ctx *c = ctx;
    skyprof_agent *a = NULL;
    skp_err err = skp__agent_new(c->cfg, c->vt, c->tr, c->clock, &a);
    if (!err)
        skp__agent_free(a);
    else
        assert_null(a);
    return err;
}

static skp_err snapshot_pb_body(void *ctx, long k)
{
    (void)k;
    const struct skyprof_stack_source *vt = ctx;
    struct skyprof_frame fr[2] = {{0x1000, NULL, 0, SKYPROF_FRAME_ADDR}, {0, "main", 4, 0}};
    struct skyprof_capture cap = {.frames = fr, .cap = 2, .n = 2};
    struct skp__symcache sc;
    skp_err err = skp__symcache_init(&sc);
    if (err)
        return err;
    struct skp__snapshot *s = skp__snapshot_new("t", "s", 1, 0, &cap, 2);
    struct skp__pb_snapshot pb;
    memset(&pb, 0, sizeof(pb));
    err = s ? skp__reporter_snapshot_pb(s, &sc, vt, &pb) : SKP_ENOMEM;
    if (!err) {
        assert_int_equal(pb.msg.stack->n_codesignatures, 2);
        assert_string_equal(pb.msg.stack->codesignatures[1], "0x1000"); /* no symbolize */
    }
    skp__pb_snapshot_cleanup(&pb);
    skp__snapshot_free(s);
    skp__symcache_cleanup(&sc);
    return err;
}

static void test_alloc_faults(void **state)
{
    (void)state;
    struct fake_clock clock;
    struct fake_transport ft;
    struct fake_source src;
    fake_clock_init(&clock, T0);
    fake_transport_init(&ft);
    fake_source_init(&src, 3);
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    struct skyprof_kv props[] = {{"k", "v"}};
    cfg.properties = props;
    cfg.n_properties = 1;
    struct skp__transport tr = fake_transport_vtable(&ft);
    struct skyprof_stack_source vt = fake_source_vtable(&src);
    struct agent_new_ctx an = {&cfg, &vt, &tr, &clock.clock};
    struct skp_alloc_fault_runs runs = skp_test_alloc_faults(agent_new_body, &an, 200);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
    /* snapshot + protobuf building */
    runs = skp_test_alloc_faults(snapshot_pb_body, &vt, 50);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
    /* the tracer under memory pressure: no segment buffer -> NULL; no copy -> dropped */
    struct skp__tracer_conf *conf = skpx_calloc(1, sizeof(*conf));
    conf->epoch = 99;
    snprintf(conf->service, sizeof(conf->service), "svc");
    snprintf(conf->id_prefix, sizeof(conf->id_prefix), "ff");
    conf->report_segments = true;
    conf->segment_limit = 100;
    assert_int_equal(skp__hub_publish(conf), SKP_OK);
    skyprof_span *warm = skyprof_entry_begin("/warm", NULL); /* this thread's buffer exists */
    skyprof_entry_end(warm);
    uint64_t dropped0 = atomic_load(&skp__hub()->segments_dropped);
    skyprof_span *sp = skyprof_entry_begin("/ep", NULL);
    assert_non_null(sp);
    skpx_alloc_fail_after(0);
    skyprof_entry_end(sp);
    pthread_t t;
    void *r = (void *)1;
    pthread_create(&t, NULL, begin_in_new_thread, NULL);
    pthread_join(t, &r);
    skpx_alloc_fail_after(-1);
    assert_null(r);
    assert_int_equal(atomic_load(&skp__hub()->segments_dropped), dropped0 + 1);
    struct skp__finished_segment *fs;
    while ((fs = skp__ring_pop(&skp__hub()->segments)))
        skp__finished_segment_free(fs);
    assert_int_equal(skp__hub_publish(NULL), SKP_OK);
    fake_transport_cleanup(&ft);
}

/* --- the real start/stop path (unreachable backend) ----------------------------------------- */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[8192];

static void capture_log(void *ud, enum skyprof_log_level level, const char *line)
{
    (void)level;
    assert_ptr_equal(ud, log_text);
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof(log_text) - n, "%s\n", line);
    pthread_mutex_unlock(&log_mu);
}

static bool log_has(const char *s)
{
    pthread_mutex_lock(&log_mu);
    bool r = strstr(log_text, s) != NULL;
    pthread_mutex_unlock(&log_mu);
    return r;
}

static void test_start_stop_real(void **state)
{
    (void)state;
    struct fake_source src;
    fake_source_init(&src, 3);
    struct skyprof_stack_source vt = fake_source_vtable(&src);
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    snprintf(cfg.backend, sizeof(cfg.backend), "127.0.0.1:1"); /* nothing listens */
    cfg.log_sink = capture_log;
    cfg.log_ud = log_text;
    cfg.log_level = SKYPROF_LOG_INFO;
    skyprof_agent *a = NULL;
    assert_int_equal(skyprof_agent_start(&cfg, &vt, &a), SKP_OK);
    assert_ptr_equal(skyprof_agent_current(), a);
    assert_true(strchr(skyprof_agent_instance(a), '@') != NULL); /* generated */
    skyprof_agent *b = NULL;
    assert_int_equal(skyprof_agent_start(&cfg, &vt, &b), SKP_EEXIST);
    assert_null(b);
    struct skyprof_task_spec bad = {"bad", "/ep", 99, 0, 10, 5, 0};
    assert_int_equal(skyprof_agent_add_task(a, &bad), SKP_EINVAL);
    struct skyprof_stats st;
    skyprof_agent_get_stats(a, &st);
    assert_int_equal(st.tasks_rejected, 1);
    assert_non_null(strstr(st.last_reject_reason, "duration"));
    assert_true(log_has("rejected"));
    struct skyprof_task_spec good = {"good", "/ep", 1, 0, 10, 5, 0};
    assert_int_equal(skyprof_agent_add_task(a, &good), SKP_OK);
    assert_true(skyprof_agent_task_active(a));
    assert_int_equal(skyprof_agent_set_stack_source(a, &vt), SKP_ESTATE); /* task active */
    char buf[64];
    assert_int_equal(skyprof_capture_thread(a, NULL, 0, buf, sizeof(buf), NULL), SKP_ESTATE);
    skyprof_span *e = skyprof_entry_begin("/ep", NULL);
    assert_non_null(e);
    skyprof_entry_end(e);
    int64_t t0 = skpx_mono_ms();
    skyprof_agent_stop(a, 200); /* the backend is down: bounded by the flush deadline */
    assert_true(skpx_mono_ms() - t0 < 5000);
    assert_null(skyprof_agent_current());
    assert_null(skyprof_entry_begin("/ep", NULL));
    assert_true(log_has("started"));
    /* the capture hook through the installed source, on a fresh agent without a task */
    assert_int_equal(skyprof_agent_start(&cfg, &vt, &a), SKP_OK);
    void *h = NULL;
    int tid = 0;
    assert_int_equal(skyprof_thread_attach(a, &h, &tid), SKP_OK);
    char stack[256];
    int n = 0;
    assert_int_equal(skyprof_capture_thread(a, h, tid, stack, sizeof(stack), &n), SKP_OK);
    assert_int_equal(n, 3);
    assert_string_equal(stack, "f0\nf1\nf2\n");
    skyprof_thread_release(a, h);
    assert_int_equal(skyprof_agent_sample_now(a), SKP_ESTATE);
    skyprof_agent_stop(a, 0);
    assert_int_equal(skyprof_agent_restart_after_fork(&b), SKP_ESTATE); /* not a forked child */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heartbeat_properties_every_10th),
        cmocka_unit_test(test_poll_cursor_task_lifecycle_snapshots),
        cmocka_unit_test(test_threshold_held_dumps_on_the_wire),
        cmocka_unit_test(test_backend_down),
        cmocka_unit_test(test_segments_reported),
        cmocka_unit_test(test_contexts_interleave),
        cmocka_unit_test(test_alloc_faults),
        cmocka_unit_test(test_start_stop_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
