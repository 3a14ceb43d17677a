/* ebpf_analyze.c - eBPF stacks to stack trees (see ebpf_analyze.h). */
#include "server/analysis/ebpf_analyze.h"

#include <string.h>

#include "common/alloc.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"
#include "server/store/store_ebpf.h"
#include "wire/pprof_encode.h"

struct ebpf_build {
    struct skpx_pprof *on, *off; /* one builder per kind, created on first use */
    struct skpx_pprof_frame frames[SKPX_PPROF_MAX_FRAMES];
    json_t *processes; /* process id -> {onCpuStacks, offCpuStacks} */
    uint64_t n_stacks;
    int64_t first_ms, last_ms;
    bool full; /* a builder ran out of budget */
};

skp_err ebpf_build_new(struct ebpf_build **out)
{
    struct ebpf_build *b = skpx_calloc(1, sizeof(*b));
    if (b && !(b->processes = json_object())) {
        skpx_free(b);
        b = NULL;
    }
    *out = b;
    return b ? SKP_OK : SKP_ENOMEM;
}

void ebpf_build_free(struct ebpf_build *b)
{
    if (!b)
        return;
    json_decref(b->processes);
    skpx_pprof_free(b->on);
    skpx_pprof_free(b->off);
    skpx_free(b);
}

bool ebpf_build_empty(const struct ebpf_build *b)
{
    return !b->on && !b->off;
}

static skp_err builder_for(struct ebpf_build *b, enum store_ebpf_kind kind, struct skpx_pprof **out)
{
    struct skpx_pprof **slot = kind == STORE_EBPF_ON_CPU ? &b->on : &b->off;
    if (!*slot) {
        struct skpx_pprof_type on_types[] = {{"samples", "count"}};
        struct skpx_pprof_type off_types[] = {{"switches", "count"}, {"off_cpu", "nanoseconds"}};
        skp_err err = kind == STORE_EBPF_ON_CPU
                          ? skpx_pprof_new(on_types, 1, EBPF_PROFILE_BYTES_MAX, slot)
                          : skpx_pprof_new(off_types, 2, EBPF_PROFILE_BYTES_MAX, slot);
        if (err)
            return err;
    }
    *out = *slot;
    return SKP_OK;
}

static skp_err on_stack(void *ud, const struct store_ebpf_stack *s)
{
    struct ebpf_build *b = ud;
    struct skpx_pprof *prof = NULL;
    skp_err err = builder_for(b, s->kind, &prof);
    if (err)
        return err;
    size_t n = 0;
    for (const char *p = s->symbols; *p && n < SKPX_PPROF_MAX_FRAMES;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        b->frames[n++] = (struct skpx_pprof_frame){
            .func = len ? p : "?", .func_len = len ? len : 1, .file = "", .file_len = 0};
        p += len + (e ? 1 : 0);
    }
    int64_t values[2] = {s->count, s->duration_ns};
    err = skpx_pprof_add(prof, b->frames, n, values, NULL, 0);
    if (err == SKP_EFULL) {
        b->full = true;
        return SKP_OK; /* dropped; the result says the profile is partial */
    }
    if (err)
        return err;
    b->n_stacks++;
    if (!b->first_ms || s->time_ms < b->first_ms)
        b->first_ms = s->time_ms;
    if (s->time_ms > b->last_ms)
        b->last_ms = s->time_ms;
    json_t *pr = json_object_get(b->processes, s->process_id);
    if (!pr) {
        pr = json_pack("{s:I, s:I}", "onCpuStacks", (json_int_t)0, "offCpuStacks", (json_int_t)0);
        if (!pr || json_object_set_new(b->processes, s->process_id, pr))
            return SKP_ENOMEM;
    }
    const char *key = s->kind == STORE_EBPF_ON_CPU ? "onCpuStacks" : "offCpuStacks";
    json_object_set_new(pr, key, json_integer(json_integer_value(json_object_get(pr, key)) + 1));
    return SKP_OK;
}

skp_err ebpf_build_scan(struct ebpf_build *b, struct store *st, const char *task_id,
                        const char *process_id, int64_t from_ms, int64_t to_ms)
{
    return store_ebpf_scan_task(st, task_id, process_id, from_ms, to_ms, on_stack, b);
}

skp_err ebpf_build_finish(struct ebpf_build *b, bool off_cpu_by_duration, struct ebpf_result *out)
{
    memset(out, 0, sizeof(*out));
    if (ebpf_build_empty(b))
        return SKP_ENOTFOUND;
    bool on = b->on != NULL;
    const char *type = on ? "samples" : off_cpu_by_duration ? "off_cpu" : "switches";
    uint8_t *buf = NULL;
    size_t len = 0;
    skp_err err = skpx_pprof_encode(on ? b->on : b->off, false, &buf, &len);
    if (err)
        return err;
    struct pprof_profile *pp = NULL;
    struct pprof_analyze *an = NULL;
    err = pprof_decode(buf, len, 0, &pp, NULL);
    skpx_free(buf);
    if (!err)
        err = pprof_analyze_new(type, true, &an);
    if (!err)
        err = pprof_analyze_add(an, pp);
    if (!err)
        err = pprof_analyze_finish(an, &out->analysis);
    pprof_free(pp);
    if (!err) {
        uint64_t n_samples = 0;
        size_t n_skipped = 0;
        pprof_analyze_totals(an, &out->total, &n_samples, &n_skipped);
        out->on_cpu = on;
        out->sample_type = type;
        out->unit = strcmp(type, "off_cpu") == 0 ? "nanoseconds" : "count";
        out->n_stacks = b->n_stacks;
        out->partial = b->full;
        out->first_ms = b->first_ms;
        out->last_ms = b->last_ms;
        out->processes = b->processes;
        b->processes = NULL;
    }
    pprof_analyze_free(an);
    return err;
}

void ebpf_result_cleanup(struct ebpf_result *r)
{
    analysis_free(r->analysis);
    json_decref(r->processes);
    memset(r, 0, sizeof(*r));
}
