/* pysource.c - see pysource.h. The per-thread handle is a heap skp__pytarget; the reader (and
 * its code cache) is owned by the source and used only by the sampler thread. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pysource.h"

#include "common/alloc.h"
#include "python/pystack.h"

static void *py_thread_attach(void *ud)
{
    (void)ud;
    struct skp__pytarget *t = skpx_malloc(sizeof(*t));
    if (!t)
        return NULL;
    /* Runs inside skyprof_entry_begin, called by the binding with the GIL held. A thread with no
     * Python thread state (a C caller) is refused. */
    if (skp__pytarget_init_current(t) != SKP_OK) {
        skpx_free(t);
        return NULL;
    }
    return t;
}

static int py_capture(void *ud, void *handle, int tid, struct skyprof_capture *out)
{
    (void)tid;
    return skp__pyreader_capture(ud, handle, false, out);
}

static void py_thread_release(void *ud, void *handle)
{
    (void)ud;
    skpx_free(handle);
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
    };
    return SKP_OK;
}

bool skp__pysource_is_direct(const struct skyprof_stack_source *src)
{
    return skp__pyreader_is_direct(src->ud);
}
