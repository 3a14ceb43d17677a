/* Fuzz target of the agent's ServiceWithPolicyJSON parser (src/agent/cont_policy.c). Checks:
 * no read outside the input (ASan; the input is copied to an exact-size buffer without a NUL),
 * a failure leaves an empty policy and a reason, a success gives items within their limits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cont_policy.h"
#include "common/alloc.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct skp__cont_policy pol;
    char *copy = skpx_malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    bool found = false;
    char why[160];
    skp_err err = skp__cont_policy_parse(copy, size, "svc", &pol, &found, why, sizeof(why));
    if (err) {
        CHECK(!found && pol.uuid[0] == '\0' && why[0] != '\0');
    } else {
        CHECK(strlen(pol.uuid) < SKP_CONT_UUID_MAX);
        for (int t = 0; t < SKP_CONT_N_TARGETS; t++) {
            for (int m = 0; m < SKP_CONT_N_MONITORS; m++) {
                const struct skp__cont_item *it = &pol.items[t][m];
                if (!it->present)
                    continue;
                CHECK(it->period >= 1 && it->period <= SKP_CONT_PERIOD_MAX);
                CHECK(it->count >= 1 && it->count <= it->period);
                CHECK(it->n_uris >= 0 && it->n_uris <= SKP_CONT_URIS_MAX);
                CHECK(strlen(it->regex) < SKP_CONT_URI_MAX);
            }
        }
    }
    skpx_free(copy);
    return 0;
}
