/* driver.c - libFuzzer target for the pprof decoder (src/server/formats/pprof_decode.c) and the
 * analysis that walks what it decodes (src/server/analysis/pprof_analyze.c): any input must give a
 * profile or a clean error, within bounded memory, and every decoded profile must analyse for
 * each of its sample types without touching memory outside the tables. */
#include <stddef.h>
#include <stdint.h>

#include "server/analysis/analyzer.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"

/* Keeps one input's memory small enough for the fuzzer's RSS limit: the decompressed size and
 * the decoder's memory limits are on (issue 25), as in goProfileReport and the analyses. */
#define FUZZ_MAX_DECODED ((size_t)16 * 1024 * 1024)
#define FUZZ_MAX_MEMORY ((size_t)64 * 1024 * 1024)
#define FUZZ_MAX_SAMPLES 200000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    const struct pprof_limits lim = {.max_decoded = FUZZ_MAX_DECODED,
                                     .max_memory = FUZZ_MAX_MEMORY,
                                     .max_samples = FUZZ_MAX_SAMPLES};
    if (pprof_decode_limited(data, size, &lim, &p, why) != SKP_OK)
        return 0;
    for (size_t t = 0; t <= p->n_sample_types; t++) {
        struct pprof_analyze *an = NULL;
        /* t == n: the default type; otherwise each type by name, by line and by function. */
        const char *type = t < p->n_sample_types ? p->sample_types[t].type : NULL;
        if (pprof_analyze_new(type, t % 2 == 1, &an) != SKP_OK)
            break;
        struct analysis *a = NULL;
        if (pprof_analyze_add(an, p) == SKP_OK && pprof_analyze_finish(an, &a) == SKP_OK)
            analysis_free(a);
        pprof_analyze_free(an);
    }
    pprof_free(p);
    return 0;
}
