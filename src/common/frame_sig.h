/* frame_sig.h - the C parser of code signatures (frames), the twin of web/src/frames.js: it
 * splits a signature into the function a label shows first and a short location, so the server's
 * exports (HTML flame graph, speedscope, collapsed stacks) read like the web UI
 * ("/srv/app/seed_app.py.do_POST: 44" -> do_POST, seed_app.py:44). Both parsers are checked
 * against the same vectors (tests/data/frame_sigs.tsv). Pure functions over a borrowed byte
 * slice: no allocation, no NUL needed, thread-safe. Signature forms, by producer:
 *   Python agent      "<file>.py.<func>: <line>" (func may be "Class.method"; line optional)
 *   native / Go       "func (file:line)", "func (module)"; Go's import path is cut to its last part
 *   no symbol         "module+0x1a2b", "0x7f00aa"
 *   JFR / Java        "pkg.Class.method:42" -> Class.method at pkg:42 (a lambda's hidden-class id
 *                     "$$Lambda$88+0x7fb0.1" is cut to "$$Lambda"; line 2^32-1 means none)
 *   pprof names       "main.spin:12" -> main.spin :12 */
#ifndef SKP_COMMON_FRAME_SIG_H
#define SKP_COMMON_FRAME_SIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

enum skpx_frame_lang {
    SKPX_FRAME_OTHER = 0,
    SKPX_FRAME_PYTHON = 1,
    SKPX_FRAME_NATIVE = 2,
    SKPX_FRAME_GO = 3,
    SKPX_FRAME_JAVA = 4,
    SKPX_FRAME_ADDRESS = 5,
};

/* A parsed signature. Ranges index the signature with the bytes [cut_off, cut_off + cut_len)
 * removed (only a JFR lambda's hidden-class id is ever cut; cut_len is 0 otherwise), so read
 * them with skpx_frame_sig_put_* rather than by hand. */
struct skpx_frame_sig {
    const char *sig; /* borrowed */
    size_t len;
    enum skpx_frame_lang lang;
    bool is_agent;               /* skyprof's own instrumentation (folded away by the web UI) */
    uint32_t line;               /* 0 = none */
    size_t func_off, func_len;   /* the function, what a label shows first */
    size_t file_off, file_len;   /* the file or module as the signature names it (may be empty) */
    size_t where_off, where_len; /* the location's name part: the file's base name or a Java
                                  * package (may be empty); the location is it + ":line" */
    size_t cut_off, cut_len;
};

/* Parses sig[0..len) (borrowed; kept by pointer in *out, which is valid while sig is). Never
 * fails: a signature of no known form is a function name alone (lang OTHER). NULL sig with len 0
 * is the empty signature. Thread-safe. */
void skpx_frame_sig_parse(const char *sig, size_t len, struct skpx_frame_sig *out);

/* Appends the function ("do_POST"), the short location ("seed_app.py:44", "com.acme:42", ":12",
 * "libc.so.6" or nothing), or the full file ("/srv/app/seed_app.py") of `f` to `b` (sticky
 * errors, see buf.h). */
void skpx_frame_sig_put_func(struct skpx_buf *b, const struct skpx_frame_sig *f);
void skpx_frame_sig_put_loc(struct skpx_buf *b, const struct skpx_frame_sig *f);
void skpx_frame_sig_put_file(struct skpx_buf *b, const struct skpx_frame_sig *f);
/* Appends the location without its line: the file's base name or a Java package. */
void skpx_frame_sig_put_where(struct skpx_buf *b, const struct skpx_frame_sig *f);

/* Appends the one-string readable name tools show for a frame (py-spy's form): "do_POST
 * (seed_app.py:44)"; "main.spin:12" when the location is a line alone; the function alone when
 * there is no location; an address ("libc.so.6+0x2a1c0") unchanged. */
void skpx_frame_sig_put_name(struct skpx_buf *b, const struct skpx_frame_sig *f);

/* "python", "native", "go", "java", "address" or "other" (the names frames.js uses). */
const char *skpx_frame_lang_name(enum skpx_frame_lang lang);

#endif
