/* fakes.h - fake clock, fake transport and fake stack source for the agent unit tests. */
#ifndef SKP_TEST_AGENT_FAKES_H
#define SKP_TEST_AGENT_FAKES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_clock.h"
#include "agent/task_context.h"
#include "agent/transport.h"
#include "common/Command.pb-c.h"
#include "skyprof/skyprof.h"

struct fake_clock {
    _Atomic int64_t now_ms;
    _Atomic int64_t mono_ns;
    struct skp__clock clock;
};
void fake_clock_init(struct fake_clock *c, int64_t now_ms);
void fake_clock_advance(struct fake_clock *c, int64_t ms);

#define FAKE_CALLS_MAX 512
#define FAKE_STREAM_MSGS_MAX 4096

struct fake_call {
    char path[128];
    uint8_t *req; /* packed request (unary) */
    size_t req_len;
    int n_stream_msgs; /* stream: messages pulled */
};

struct fake_transport {
    pthread_mutex_t mu;
    bool down;             /* every call fails with SKP_EUNAVAILABLE */
    int fail_next_streams; /* streams fail after pulling their messages */
    uint64_t connects;
    struct fake_call calls[FAKE_CALLS_MAX];
    int n_calls;
    /* messages pulled by streams, packed, in order */
    uint8_t *stream_msgs[FAKE_STREAM_MSGS_MAX];
    size_t stream_lens[FAKE_STREAM_MSGS_MAX];
    char stream_paths[FAKE_STREAM_MSGS_MAX][64];
    int n_stream_msgs;
    /* answer of the next getProfileTaskCommands (packed Commands), consumed once */
    uint8_t *next_tasks;
    size_t next_tasks_len;
};

void fake_transport_init(struct fake_transport *f);
void fake_transport_cleanup(struct fake_transport *f);
/* A transport vtable over f (not owning: destroy is NULL). */
struct skp__transport fake_transport_vtable(struct fake_transport *f);
/* Makes the next poll return `cmds` (packed now). */
void fake_transport_answer_tasks(struct fake_transport *f, const Skywalking__V3__Commands *cmds);
int fake_transport_count(struct fake_transport *f, const char *path);

/* Builds a ProfileTaskQuery command; NULL values leave the arg out. Free with free_command. */
Skywalking__V3__Command *make_task_command(const char *serial, const char *task_id,
                                           const char *endpoint, const char *duration,
                                           const char *threshold, const char *period,
                                           const char *max_sampling, const char *start,
                                           const char *create);
void free_command(Skywalking__V3__Command *c);

/* Fake stack source: string frames "f<depth-1-i>" innermost first, `depth` frames. */
struct fake_source {
    _Atomic int depth;
    _Atomic int fail; /* capture returns -1 */
    _Atomic int lose; /* the next `lose` captures return SKYPROF_CAPTURE_LOST */
    _Atomic int attaches;
    _Atomic int releases;
    _Atomic int captures;
    _Atomic int capture_sleep_us;
    struct skp__profiling_ref *end_during_capture; /* the request ends while captured */
    /* capture_prepare: calls, handles of the last call, captures done before it */
    _Atomic int prepares;
    _Atomic int prepared_n;
    _Atomic int captures_at_prepare;
    char names[4096][12];
};
void fake_source_init(struct fake_source *s, int depth);
struct skyprof_stack_source fake_source_vtable(struct fake_source *s);

#endif
