/* export_speedscope.c - speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json):
 * shared.frames holds one frame per distinct code signature (with file and line when the
 * signature carries them), and a single "sampled" profile lists one stack per tree node with a
 * non-zero self count (frame indexes root first), weighted by self count x dump period in
 * milliseconds. With export_meta.readable_names a frame's name is its function ("do_POST") and
 * the file (or Java package) and line go in speedscope's own fields (common/frame_sig.h);
 * otherwise the name is the full signature. Built with jansson; the output is the compact JSON
 * text. */
#include "server/export/export_int.h"

#include <jansson.h>
#include <string.h>

#include "common/alloc.h"
#include "common/frame_sig.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct ss_ctx {
    struct export_intern frames;
    json_t *samples;
    json_t *weights;
    int period_ms;
    uint64_t total;
};

static skp_err visit(void *ud, const struct analysis_tree *t,
                     const struct analysis_node *const *path, size_t depth)
{
    struct ss_ctx *c = ud;
    uint64_t self = export_node_self_count(t, path[depth]);
    if (self == 0)
        return SKP_OK;
    json_t *stack = json_array();
    if (!stack)
        return SKP_ENOMEM;
    for (size_t i = 0; i <= depth; i++) {
        uint32_t id;
        skp_err err = export_intern_get(&c->frames, path[i]->code_signature, &id);
        if (err || json_array_append_new(stack, json_integer(id)) != 0) {
            json_decref(stack);
            return err ? err : SKP_ENOMEM;
        }
    }
    uint64_t w = self * (uint64_t)c->period_ms;
    if (json_array_append_new(c->samples, stack) != 0 ||
        json_array_append_new(c->weights, json_integer((json_int_t)w)) != 0)
        return SKP_ENOMEM;
    c->total += w;
    return SKP_OK;
}

/* {"name": function, "file": file or package, "line": n} for one signature; NULL when out of
 * memory. `scratch` is reused between calls. */
static json_t *readable_frame(const char *sig, struct skpx_buf *scratch)
{
    struct skpx_frame_sig fs;
    skpx_frame_sig_parse(sig, strlen(sig), &fs);
    skpx_buf_reset(scratch);
    skpx_frame_sig_put_func(scratch, &fs);
    skpx_buf_putc(scratch, '\0');
    size_t file_at = scratch->len;
    if (fs.file_len)
        skpx_frame_sig_put_file(scratch, &fs);
    else if (fs.lang == SKPX_FRAME_JAVA)
        skpx_frame_sig_put_where(scratch, &fs); /* the package */
    skpx_buf_putc(scratch, '\0');
    if (scratch->err)
        return NULL;
    const char *func = (const char *)scratch->data;
    const char *file = (const char *)scratch->data + file_at;
    json_t *f = json_pack("{s:o}", "name", export_json_string(func));
    if (f && *file && json_object_set_new(f, "file", export_json_string(file)) != 0) {
        json_decref(f);
        return NULL;
    }
    if (f && fs.line && json_object_set_new(f, "line", json_integer(fs.line)) != 0) {
        json_decref(f);
        return NULL;
    }
    return f;
}

static int dump_cb(const char *p, size_t n, void *ud)
{
    struct skpx_buf *b = ud;
    skpx_buf_put(b, p, n);
    return b->err ? -1 : 0;
}

skp_err export_render_speedscope(const struct analysis *a, const struct export_meta *m,
                                 struct skpx_buf *b)
{
    struct ss_ctx c;
    json_t *root = NULL;
    skp_err err;

    memset(&c, 0, sizeof(c));
    c.period_ms = m->value_type ? 1 : export_period_ms(m);
    /* Value mode: speedscope knows nanoseconds and bytes; other units are plain numbers. */
    const char *unit = "milliseconds";
    if (m->value_type)
        unit = m->value_unit &&
                       (!strcmp(m->value_unit, "nanoseconds") || !strcmp(m->value_unit, "bytes"))
                   ? m->value_unit
                   : "none";
    c.samples = json_array();
    c.weights = json_array();
    if (!c.samples || !c.weights) {
        err = SKP_ENOMEM;
        goto out;
    }
    err = export_walk(a, visit, &c);
    if (err)
        goto out;

    json_t *frames = json_array();
    if (!frames) {
        err = SKP_ENOMEM;
        goto out;
    }
    struct skpx_buf scratch;
    skpx_buf_init(&scratch, EXPORT_MAX_OUTPUT_BYTES);
    for (size_t i = 0; i < c.frames.n; i++) {
        json_t *f = m->readable_names
                        ? readable_frame(c.frames.order[i], &scratch)
                        : json_pack("{s:o}", "name", export_json_string(c.frames.order[i]));
        if (!f || json_array_append_new(frames, f) != 0) {
            skpx_buf_cleanup(&scratch);
            json_decref(frames);
            err = SKP_ENOMEM;
            goto out;
        }
    }
    skpx_buf_cleanup(&scratch);
    const char *name = m->title && *m->title ? m->title : "skyprof profile";
    json_t *profile =
        json_pack("{s:s, s:o, s:s, s:I, s:I, s:O, s:O}", "type", "sampled", "name",
                  export_json_string(name), "unit", unit, "startValue", (json_int_t)0, "endValue",
                  (json_int_t)c.total, "samples", c.samples, "weights", c.weights);
    root = json_pack("{s:s, s:{s:o}, s:[o], s:o, s:s, s:i}", "$schema", SPEEDSCOPE_SCHEMA, "shared",
                     "frames", frames, "profiles", profile, "name", export_json_string(name),
                     "exporter", "skyprof " SKP_VERSION, "activeProfileIndex", 0);
    if (!root) {
        err = SKP_ENOMEM;
        goto out;
    }
    if (json_dump_callback(root, dump_cb, b, JSON_COMPACT) != 0)
        err = b->err ? b->err : SKP_ENOMEM;
out:
    json_decref(root);
    json_decref(c.samples);
    json_decref(c.weights);
    export_intern_cleanup(&c.frames);
    return err ? err : b->err;
}
