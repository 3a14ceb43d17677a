/* test_agent_tsan.c - concurrency of the agent's lock-free parts under ThreadSanitizer:
 * multi-producer ring, slot attempt/release against a live sampler thread and task restarts,
 * and request threads using the tracer API while the tracer config is switched and finished
 * segments are consumed. Exits non-zero on a failed check; TSan reports fail the run too
 * (TSAN_OPTIONS=halt_on_error=1 exitcode=66 set by the ctest). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/ring.h"
#include "agent/sampler.h"
#include "agent/snapshot.h"
#include "agent/task_context.h"
#include "agent/tracer.h"
#include "common/alloc.h"
#include "common/clock.h"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* --- ring: 4 producers, 1 consumer ----------------------------------------------------------- */
#define PRODUCERS 4
#define PER_PRODUCER 20000
static struct skp__ring g_ring;
static _Atomic int g_producers_done;
static _Atomic uint64_t g_ok;

static void *producer(void *arg)
{
    uintptr_t base = (uintptr_t)arg * PER_PRODUCER;
    for (uintptr_t i = 0; i < PER_PRODUCER; i++) {
        /* retry a little so that the ring is often both full and being drained */
        for (int k = 0; k < 20; k++) {
            if (skp__ring_push(&g_ring, (void *)(base + i + 1))) {
                atomic_fetch_add(&g_ok, 1);
                break;
            }
            sched_yield();
        }
    }
    atomic_fetch_add(&g_producers_done, 1);
    return NULL;
}

static void ring_stress(void)
{
    CHECK(skp__ring_init(&g_ring, 1024) == SKP_OK);
    pthread_t t[PRODUCERS];
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        pthread_create(&t[i], NULL, producer, (void *)i);
    uint64_t popped = 0;
    uintptr_t last[PRODUCERS] = {0};
    for (;;) {
        void *p = skp__ring_pop(&g_ring);
        if (p) {
            uintptr_t v = (uintptr_t)p - 1;
            uintptr_t who = v / PER_PRODUCER;
            CHECK(who < PRODUCERS);
            CHECK(v % PER_PRODUCER + 1 > last[who]); /* per-producer FIFO */
            last[who] = v % PER_PRODUCER + 1;
            popped++;
            continue;
        }
        if (atomic_load(&g_producers_done) == PRODUCERS && skp__ring_size(&g_ring) == 0)
            break;
        sched_yield();
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(t[i], NULL);
    CHECK(popped == atomic_load(&g_ring.pushed));
    CHECK(popped == atomic_load(&g_ok));
    skp__ring_cleanup(&g_ring);
    printf("ring: popped %llu dropped %llu\n", (unsigned long long)popped,
           (unsigned long long)atomic_load(&g_ring.dropped));
}

/* --- a stack source ---------------------------------------------------------------------- */
static _Atomic int g_attach, g_release;
static void *src_attach(void *ud)
{
    (void)ud;
    atomic_fetch_add(&g_attach, 1);
    return &g_attach;
}
static void src_release(void *ud, void *h)
{
    (void)ud;
    (void)h;
    atomic_fetch_add(&g_release, 1);
}
static int src_capture(void *ud, void *h, int tid, struct skyprof_capture *out)
{
    (void)ud;
    (void)h;
    (void)tid;
    static const char *names[] = {"leaf", "mid", "root"};
    for (int i = 0; i < 3; i++) {
        out->frames[i].kind = SKYPROF_FRAME_STR;
        out->frames[i].str = names[i];
        out->frames[i].len = (uint32_t)strlen(names[i]);
    }
    out->n = 3;
    return 0;
}
static const struct skyprof_stack_source g_src = {.name = "tsan",
                                                  .thread_attach = src_attach,
                                                  .capture = src_capture,
                                                  .thread_release = src_release};

/* --- request threads through the tracer, sampler thread, restarts ------------------------- */
#define WORKERS 4
#define REQUESTS 3000
static _Atomic int g_stop_consumer;
static struct skp__snapshot_queue g_q;

static void *request_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < REQUESTS; i++) {
        skyprof_span *e = skyprof_entry_begin(i % 2 ? "/slow" : "/fast", NULL);
        skyprof_span *x = skyprof_span_begin(SKYPROF_SPAN_EXIT, "call", "peer:1");
        char sw8[SKYPROF_SW8_MAX];
        (void)skyprof_sw8_inject(sw8, sizeof(sw8));
        skyprof_span_add_tag(x, "k", "v");
        if (i % 7 == 0)
            usleep(50);
        skyprof_span_end(x);
        skyprof_entry_end(e);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    struct skp__hub *h = skp__hub();
    while (!atomic_load(&g_stop_consumer)) {
        struct skp__finished_segment *fs;
        while ((fs = skp__ring_pop(&h->segments)))
            skp__finished_segment_free(fs);
        struct skp__snapshot *s;
        while ((s = skp__snapshot_queue_pop(&g_q)))
            skp__snapshot_free(s);
        usleep(100);
    }
    return NULL;
}

static struct skp__tracer_conf *mkconf(uint64_t epoch)
{
    struct skp__tracer_conf *c = skpx_calloc(1, sizeof(*c));
    c->epoch = epoch;
    snprintf(c->service, sizeof(c->service), "svc");
    snprintf(c->instance, sizeof(c->instance), "inst");
    snprintf(c->id_prefix, sizeof(c->id_prefix), "%llx", (unsigned long long)epoch);
    c->profile_active = true;
    c->report_segments = true;
    c->segment_limit = 1000;
    return c;
}

static void tracer_stress(void)
{
    struct skp__hub *h = skp__hub();
    CHECK(skp__hub_publish(mkconf(1)) == SKP_OK);
    CHECK(skp__snapshot_queue_init(&g_q, 4500, 1 << 24) == SKP_OK);
    struct skp__sampler smp;
    CHECK(skp__sampler_init(&smp, &h->ctx, &g_q, &skp__clock_real, 64, 600000) == SKP_OK);
    struct skp__task t;
    memset(&t, 0, sizeof(t));
    snprintf(t.task_id, sizeof(t.task_id), "t");
    snprintf(t.endpoint, sizeof(t.endpoint), "/slow");
    t.duration_min = 1;
    t.dump_period_ms = 1;
    t.max_sampling_count = 1 << 30;
    skp__task_ctx_start(&h->ctx, &t, 3, &g_src);
    CHECK(skp__sampler_start(&smp, 1, skpx_now_ms() + 60000) == SKP_OK);
    pthread_t w[WORKERS], c;
    pthread_create(&c, NULL, consumer, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, request_thread, NULL);
    for (int k = 0; k < 6; k++) {
        usleep(5000);
        skp__sampler_stop(&smp);
        skp__task_ctx_stop(&h->ctx);
        CHECK(skp__hub_publish(k % 2 ? mkconf(10 + (uint64_t)k) : NULL) == SKP_OK);
        skp__task_ctx_start(&h->ctx, &t, 3, &g_src);
        CHECK(skp__sampler_start(&smp, 1, skpx_now_ms() + 60000) == SKP_OK);
    }
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    skp__sampler_stop(&smp);
    skp__task_ctx_stop(&h->ctx);
    atomic_store(&g_stop_consumer, 1);
    pthread_join(c, NULL);
    CHECK(skp__task_ctx_busy_slots(&h->ctx) == 0);
    CHECK(atomic_load(&g_attach) == atomic_load(&g_release));
    printf("tracer: slots taken %d, snapshots %llu\n", atomic_load(&g_attach),
           (unsigned long long)atomic_load(&smp.captured));
    skp__sampler_cleanup(&smp);
    skp__snapshot_queue_cleanup(&g_q);
    CHECK(skp__hub_publish(NULL) == SKP_OK);
}

int main(void)
{
    ring_stress();
    tracer_stress();
    printf("test_agent_tsan: ok\n");
    return 0;
}
