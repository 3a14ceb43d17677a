/* libFuzzer target for the JFR parser (src/server/formats/jfr_*.c): any bytes, as an uploaded
 * recording. The parse must end in SKP_OK or an error with a message, within bounded memory
 * and time; every frame, class and thread string handed to the callback is read so ASan sees
 * a dangling or unterminated one. The same bytes then go through the per-thread timeline
 * (jfr_timeline.c), whose cells must add up to its samples. Seed: corpus/ (a real JDK 17 recording made with
 * skyprof-min.jfc; see README in this folder). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "server/formats/jfr.h"
#include "server/analysis/jfr_timeline.h"

static skp_err touch(void *ctx, const struct jfr_sample *s)
{
    size_t *sum = ctx;
    for (uint32_t i = 0; i < s->n_frames; i++)
        *sum += strlen(s->frames[i]);
    if (s->thread)
        *sum += strlen(s->thread);
    if (s->object_class)
        *sum += strlen(s->object_class);
    *sum += strlen(s->event_type);
    return SKP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t sum = 0;
    struct jfr_parse_opts o = {.with_lines = (size & 1) != 0, .max_chunk_bytes = 16u << 20};
    struct jfr_parser *p = NULL;
    if (jfr_parser_new(&o, touch, &sum, &p))
        return 0;
    struct jfr_error err;
    skp_err e = jfr_parser_parse_mem(p, data, size, &err);
    if (e == SKP_EINVAL && err.msg[0] == '\0')
        __builtin_trap(); /* every rejection explains itself */
    jfr_parser_free(p);

    struct jfr_timeline *tl = NULL;
    if (jfr_timeline_new((enum jfr_kind)(size % JFR_KIND_COUNT), &tl))
        return 0;
    const struct jfr_timeline_view *v = NULL;
    skp_err added = jfr_timeline_add_mem(tl, data, size, &err);
    if (added == SKP_EINVAL && err.msg[0] == '\0')
        __builtin_trap();
    if (jfr_timeline_finish(tl, (uint32_t)(size % 300), &v) == SKP_OK) {
        uint64_t total = 0;
        for (size_t i = 0; i < v->n_threads; i++) {
            uint64_t w = 0;
            for (size_t c = 0; c < v->threads[i].n_cells; c++) {
                const struct jfr_timeline_cell *x = &v->threads[i].cells[c];
                if (x->bucket >= v->n_buckets || x->frame >= v->n_frames ||
                    x->leaf_weight > x->weight)
                    __builtin_trap();
                w += x->weight;
                sum += strlen(v->frames[x->frame]);
            }
            if (w != v->threads[i].weight)
                __builtin_trap();
            total += w;
        }
        if (v->n_threads_omitted == 0 && total != 0 && v->n_samples == 0)
            __builtin_trap();
    }
    jfr_timeline_free(tl);
    return 0;
}
