/* Fuzz target of the code signature parser (src/common/frame_sig.c): any bytes parse (there is
 * no error) without reading outside the slice, every range lies inside the signature, and the
 * readable texts are never longer than the signature plus the few bytes a label adds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/frame_sig.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    /* An exact-size copy: ASan sees any read past the slice. */
    char *sig = malloc(size ? size : 1);
    if (!sig)
        return 0;
    if (size)
        memcpy(sig, data, size);
    struct skpx_frame_sig f;
    skpx_frame_sig_parse(sig, size, &f);
    CHECK(f.sig == sig && f.len == size);
    CHECK(f.cut_len <= size && f.cut_off <= size - f.cut_len);
    size_t vn = size - f.cut_len;
    CHECK(f.func_off <= vn && f.func_len <= vn - f.func_off);
    CHECK(f.where_off <= vn && f.where_len <= vn - f.where_off);
    CHECK(f.file_off <= size && f.file_len <= size - f.file_off);
    CHECK(f.lang <= SKPX_FRAME_ADDRESS);
    CHECK(f.cut_len == 0 || f.lang == SKPX_FRAME_JAVA || f.lang == SKPX_FRAME_OTHER);
    struct skpx_buf b;
    skpx_buf_init(&b, size + 64);
    skpx_frame_sig_put_name(&b, &f);
    CHECK(b.err == SKP_OK && b.len <= size + 16);
    skpx_buf_reset(&b);
    skpx_frame_sig_put_func(&b, &f);
    CHECK(b.err == SKP_OK && b.len == f.func_len);
    skpx_buf_reset(&b);
    skpx_frame_sig_put_loc(&b, &f);
    CHECK(b.err == SKP_OK && b.len <= f.where_len + 11);
    skpx_buf_cleanup(&b);
    /* Parsing is a pure function of the bytes. */
    struct skpx_frame_sig g;
    skpx_frame_sig_parse(sig, size, &g);
    CHECK(memcmp(&f, &g, sizeof(f)) == 0);
    free(sig);
    return 0;
}
