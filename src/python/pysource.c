/* pysource.c - see pysource.h. The per-request handle is a heap skp__pyhandle (refcounted: the
 * profiling slot holds one reference, an asyncio request's Python object may hold another); the
 * reader (and its code cache) is owned by the source and used only by the sampler thread. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pysource.h"

#include <stdatomic.h>

#include "common/alloc.h"
#include "python/pystack.h"

struct skp__pyhandle {
    struct skp__pytarget t; /* the request's thread (the loop thread for a task) */
    uintptr_t coro;         /* the request task's coroutine, 0 = a thread request */
    atomic_int refs;
    atomic_int n_delegated;      /* worker threads running work the request handed over */
    struct skp__pytarget worker; /* the last of them (valid while n_delegated > 0) */
};

/* Set by the binding around skyprof_entry_begin on this thread (GIL held). */
static __thread uintptr_t t_pending_coro;
static __thread struct skp__pyhandle *t_attached;

void skp__pysource_set_pending_coro(uintptr_t coro)
{
    t_pending_coro = coro;
    if (coro && t_attached) { /* a new begin: the last one's caller did not take its handle */
        skp__pyhandle_unref(t_attached);
        t_attached = NULL;
    }
}

struct skp__pyhandle *skp__pysource_take_attached(void)
{
    struct skp__pyhandle *h = t_attached;
    t_attached = NULL;
    return h;
}

void skp__pyhandle_unref(struct skp__pyhandle *h)
{
    if (h && atomic_fetch_sub(&h->refs, 1) == 1)
        skpx_free(h);
}

void skp__pyhandle_delegate_begin(struct skp__pyhandle *h)
{
    if (!h)
        return;
    struct skp__pytarget w;
    if (skp__pytarget_init_current(&w) != SKP_OK)
        return;
    /* A torn read of `worker` by the sampler fails its validation (tstate, ids): a lost sample. */
    h->worker = w;
    atomic_fetch_add(&h->n_delegated, 1);
}

void skp__pyhandle_delegate_end(struct skp__pyhandle *h)
{
    if (h && atomic_load(&h->n_delegated) > 0)
        atomic_fetch_sub(&h->n_delegated, 1);
}

static void *py_thread_attach(void *ud)
{
    (void)ud;
    struct skp__pyhandle *h = skpx_calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    /* Runs inside skyprof_entry_begin, called by the binding with the GIL held. A thread with no
     * Python thread state (a C caller) is refused. */
    if (skp__pytarget_init_current(&h->t) != SKP_OK) {
        skpx_free(h);
        return NULL;
    }
    h->coro = t_pending_coro;
    atomic_store(&h->refs, 1);
    if (h->coro && !t_attached) {
        atomic_fetch_add(&h->refs, 1); /* the binding's reference (skp__pysource_take_attached) */
        t_attached = h;
    }
    return h;
}

static int py_capture(void *ud, void *handle, int tid, struct skyprof_capture *out)
{
    (void)tid;
    struct skp__pyhandle *h = handle;
    int rc;
    if (!h->coro) {
        rc = skp__pyreader_capture(ud, &h->t, false, out);
    } else {
        struct skp__pytarget *worker = atomic_load(&h->n_delegated) > 0 ? &h->worker : NULL;
        rc = skp__pyreader_capture_task(ud, &h->t, h->coro, worker, out);
    }
    skp__pyreader_capture_done(ud);
    return rc;
}

/* The await chains of the asyncio requests about to be captured, in one batched read. */
static void py_capture_prepare(void *ud, void *const *handles, size_t n)
{
    uintptr_t coros[SKYPROF_MAX_PARALLEL_CAP];
    size_t n_coros = 0;
    for (size_t i = 0; i < n && n_coros < SKYPROF_MAX_PARALLEL_CAP; i++) {
        const struct skp__pyhandle *h = handles[i];
        if (h && h->coro)
            coros[n_coros++] = h->coro;
    }
    skp__pyreader_prepare_tasks(ud, coros, n_coros, n);
}

static void py_thread_release(void *ud, void *handle)
{
    (void)ud;
    skp__pyhandle_unref(handle);
}

static void py_destroy(void *ud)
{
    skp__pyreader_free(ud);
}

skp_err skp__pysource_init(struct skyprof_stack_source *src, bool force_portable)
{
    struct skp__pyreader *r = NULL;
    skp_err err = skp__pyreader_new(force_portable, &r);
    if (err)
        return err;
    *src = (struct skyprof_stack_source){
        .name = "python",
        .ud = r,
        .thread_attach = py_thread_attach,
        .capture = py_capture,
        .thread_release = py_thread_release,
        .symbolize = NULL,
        .destroy = py_destroy,
        .capture_prepare = py_capture_prepare,
    };
    return SKP_OK;
}

bool skp__pysource_is_direct(const struct skyprof_stack_source *src)
{
    return skp__pyreader_is_direct(src->ud);
}
