/* libFuzzer target for the JFR parser (src/server/jfr_*.c): any bytes, as an uploaded
 * recording. The parse must end in SKP_OK or an error with a message, within bounded memory
 * and time; every frame, class and thread string handed to the callback is read so ASan sees
 * a dangling or unterminated one. Seed: corpus/ (a real JDK 17 recording made with
 * skyprof-min.jfc; see README in this folder). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "server/jfr.h"

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
    return 0;
}
