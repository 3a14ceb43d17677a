/* reporter.c - protobuf builders for snapshots and segments (see reporter.h). Each message is
 * backed by one allocation sized up front, so cleanup is a single free. */
#include "agent/reporter.h"

#include <string.h>

#include "common/alloc.h"

skp_err skp__reporter_snapshot_pb(const struct skp__snapshot *s, struct skp__symcache *cache,
                                  const struct skyprof_stack_source *src,
                                  struct skp__pb_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    skywalking__v3__thread_snapshot__init(&out->msg);
    skywalking__v3__thread_stack__init(&out->stack);
    const char *sym[SKYPROF_MAX_STACK_DEPTH_CAP];
    size_t text = 0;
    for (uint32_t i = 0; i < s->n_frames; i++) {
        const struct skp__snap_frame *f = &s->frames[i];
        if (f->kind == SKYPROF_FRAME_ADDR) {
            sym[i] = skp__symcache_get(cache, src, f->addr);
            text += strlen(sym[i]) + 1;
        } else {
            sym[i] = NULL;
            text += f->len + 1;
        }
    }
    size_t ptrs = s->n_frames * sizeof(char *);
    out->mem = skpx_malloc(ptrs + text + 1);
    if (!out->mem)
        return SKP_ENOMEM;
    char **sigs = (char **)(void *)out->mem;
    char *t = out->mem + ptrs;
    for (uint32_t i = 0; i < s->n_frames; i++) {
        const struct skp__snap_frame *f = &s->frames[i];
        size_t n = sym[i] ? strlen(sym[i]) : f->len;
        memcpy(t, sym[i] ? sym[i] : s->text + f->off, n);
        t[n] = '\0';
        sigs[i] = t;
        t += n + 1;
    }
    out->stack.n_codesignatures = s->n_frames;
    out->stack.codesignatures = sigs;
    out->msg.taskid = (char *)s->task_id;
    out->msg.tracesegmentid = (char *)s->segment_id;
    out->msg.time = s->time_ms;
    out->msg.sequence = s->sequence;
    out->msg.stack = &out->stack;
    return SKP_OK;
}

/* Frees the one allocation a built message lives in (both kinds have one) and forgets it. */
static void pb_mem_release(char **mem)
{
    skpx_free(*mem);
    *mem = NULL;
}

void skp__pb_snapshot_cleanup(struct skp__pb_snapshot *out)
{
    if (out)
        pb_mem_release(&out->mem);
}

/* bump allocator over out->mem */
struct bump {
    char *p;
    size_t left;
};

static void *bump(struct bump *b, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > b->left)
        return NULL;
    void *r = b->p;
    b->p += n;
    b->left -= n;
    memset(r, 0, n);
    return r;
}

static char *bump_str(struct bump *b, const char *s, size_t n)
{
    char *r = bump(b, n + 1);
    if (r)
        memcpy(r, s, n);
    return r;
}

skp_err skp__reporter_segment_pb(const struct skp__finished_segment *fs, const char *service,
                                 const char *instance, struct skp__pb_segment *out)
{
    memset(out, 0, sizeof(*out));
    skywalking__v3__segment_object__init(&out->msg);
    size_t n = (size_t)fs->n_spans;
    size_t need = 64 + n * (sizeof(Skywalking__V3__SpanObject) + 16 + sizeof(void *) + 16) +
                  (size_t)fs->n_tags *
                      (sizeof(Skywalking__V3__KeyStringValuePair) + 16 + sizeof(void *) + 2 * 16) +
                  sizeof(Skywalking__V3__SegmentReference) + 2 * sizeof(void *) + 6 * 16 + 64 +
                  fs->text_len * 2 + n * 2 * 16 + 2 * 16;
    out->mem = skpx_malloc(need);
    if (!out->mem)
        return SKP_ENOMEM;
    struct bump b = {out->mem, need};
    Skywalking__V3__SpanObject **spans = bump(&b, n * sizeof(void *) + 1);
    if (!spans)
        return SKP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct skp__span_rec *r = &fs->spans[i];
        Skywalking__V3__SpanObject *so = bump(&b, sizeof(*so));
        if (!so)
            return SKP_ENOMEM;
        skywalking__v3__span_object__init(so);
        so->spanid = r->id;
        so->parentspanid = r->parent;
        so->starttime = r->start_ms;
        so->endtime = r->end_ms;
        so->operationname = bump_str(&b, fs->text + r->name_off, r->name_len);
        so->peer = bump_str(&b, fs->text + r->peer_off, r->peer_len);
        if (!so->operationname || !so->peer)
            return SKP_ENOMEM;
        so->spantype = (Skywalking__V3__SpanType)r->kind;
        so->spanlayer = (Skywalking__V3__SpanLayer)r->layer;
        so->componentid = r->component;
        so->iserror = r->is_error;
        size_t nt = 0;
        for (int32_t k = 0; k < fs->n_tags; k++)
            nt += fs->tags[k].span == r->id;
        if (nt) {
            so->tags = bump(&b, nt * sizeof(void *));
            if (!so->tags)
                return SKP_ENOMEM;
            for (int32_t k = 0; k < fs->n_tags; k++) {
                const struct skp__tag_rec *t = &fs->tags[k];
                if (t->span != r->id)
                    continue;
                Skywalking__V3__KeyStringValuePair *kv = bump(&b, sizeof(*kv));
                if (!kv)
                    return SKP_ENOMEM;
                skywalking__v3__key_string_value_pair__init(kv);
                kv->key = bump_str(&b, fs->text + t->key_off, t->key_len);
                kv->value = bump_str(&b, fs->text + t->val_off, t->val_len);
                if (!kv->key || !kv->value)
                    return SKP_ENOMEM;
                so->tags[so->n_tags++] = kv;
            }
        }
        if (i == 0 && fs->ref.present) {
            Skywalking__V3__SegmentReference *ref = bump(&b, sizeof(*ref));
            so->refs = bump(&b, sizeof(void *));
            if (!ref || !so->refs)
                return SKP_ENOMEM;
            skywalking__v3__segment_reference__init(ref);
            ref->reftype = SKYWALKING__V3__REF_TYPE__CrossProcess;
            char **dst[6] = {&ref->traceid,        &ref->parenttracesegmentid,
                             &ref->parentservice,  &ref->parentserviceinstance,
                             &ref->parentendpoint, &ref->networkaddressusedatpeer};
            for (int k = 0; k < 6; k++) {
                *dst[k] = bump_str(&b, fs->text + fs->ref.off[k], fs->ref.len[k]);
                if (!*dst[k])
                    return SKP_ENOMEM;
            }
            ref->parentspanid = fs->ref.parent_span_id;
            so->refs[0] = ref;
            so->n_refs = 1;
        }
        spans[i] = so;
    }
    out->msg.traceid = (char *)fs->trace_id;
    out->msg.tracesegmentid = (char *)fs->segment_id;
    out->msg.n_spans = n;
    out->msg.spans = spans;
    out->msg.service = (char *)service;
    out->msg.serviceinstance = (char *)instance;
    out->msg.issizelimited = fs->size_limited;
    return SKP_OK;
}

void skp__pb_segment_cleanup(struct skp__pb_segment *out)
{
    if (out)
        pb_mem_release(&out->mem);
}
