/* Unit tests for src/attach: /proc/PID/maps parsing and CPython image names, the ELF symbol
 * reader (on this machine's real python3.11 and on corrupt copies of it), CPython's location
 * table decoder (tables built by hand to the documented format), the call-tree aggregator,
 * /proc stat parent parsing, and batched remote reads that fault in the middle (on ourselves). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "attach/elfsym.h"
#include "attach/native.h"
#include "attach/procmaps.h"
#include "attach/proctree.h"
#include "attach/profile.h"
#include "attach/remote.h"
#include "common/alloc.h"
#include "common/py_linetable.h"
#include "harness/skp_alloc_faults.h"

static void maps_parse_lines(void **state)
{
    (void)state;
    static const char text[] =
        "00400000-00423000 r--p 00000000 08:01 1234   /usr/bin/python3.11\n"
        "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
        "7f1000000000-7f1000200000 r-xp 00010000 08:01 99 /opt/my dir/libpython3.12.so.1.0\n"
        "garbage line\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]";
    struct attach_maps m;
    assert_int_equal(attach_maps_parse(text, sizeof(text) - 1, &m), SKP_OK);
    assert_int_equal(m.n, 4);
    assert_int_equal(m.maps[0].start, 0x400000);
    assert_int_equal(m.maps[0].end, 0x423000);
    assert_true(m.maps[0].r && !m.maps[0].w && !m.maps[0].x);
    assert_string_equal(m.maps[0].path, "/usr/bin/python3.11");
    assert_string_equal(m.maps[1].path, "");
    assert_string_equal(m.maps[2].path, "/opt/my dir/libpython3.12.so.1.0");
    assert_int_equal(m.maps[2].offset, 0x10000);
    assert_true(m.maps[2].x);
    assert_string_equal(m.maps[3].path, "[vsyscall]");
    assert_int_equal(attach_maps_image_start(&m, "/usr/bin/python3.11"), 0x400000);
    assert_true(attach_maps_readable(&m, 0x400010, 16));
    assert_false(attach_maps_readable(&m, 0x422ff8, 16)); /* crosses the end */
    assert_false(attach_maps_readable(&m, 0x500000, 1));
    attach_maps_cleanup(&m);
}

static void maps_python_kind(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        int kind;
        unsigned minor;
    } cases[] = {
        {"/usr/bin/python3.11", 1, 11},
        {"/usr/bin/python3", 1, 0},
        {"/usr/local/bin/python3.13t", 1, 13},
        {"/usr/bin/python3.11-config", 0, 0},
        {"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", 2, 11},
        {"/opt/lib/libpython3.14.so", 2, 14},
        {"/usr/lib/libpython3.12d.so.1.0", 2, 12},
        {"/usr/lib/libpythonista.so", 0, 0},
        {"/usr/bin/pythonx", 0, 0},
        {"/lib/libc.so.6", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned minor = 99;
        int k = attach_maps_python_kind(cases[i].path, &minor);
        if (k != cases[i].kind)
            fail_msg("%s: kind %d, want %d", cases[i].path, k, cases[i].kind);
        if (k && minor != cases[i].minor)
            fail_msg("%s: minor %u, want %u", cases[i].path, minor, cases[i].minor);
    }
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void elf_real_python(void **state)
{
    (void)state;
    const char *path = "/usr/bin/python3.11";
    if (access(path, R_OK) != 0)
        skip();
    static const char *const names[] = {"_PyRuntime", "Py_Version", "PyCode_Type", "nope_none"};
    struct attach_elf_info info;
    char why[256];
    assert_int_equal(attach_elf_parse_file(path, names, 4, &info, why, sizeof(why)), SKP_OK);
    assert_true(info.values[0] != 0);
    assert_true(info.values[1] != 0);
    assert_true(info.values[2] != 0);
    assert_int_equal(info.values[3], 0);
    /* Debian's 3.11 puts _PyRuntime in its own .PyRuntime section */
    assert_true(info.pyruntime.size > 0);
    assert_int_equal(info.pyruntime.addr, info.values[0]);
    assert_true(info.data.size > 0 && info.bss.size > 0);

    /* corrupt copies: truncated anywhere, or with the section table pointing outside */
    size_t len = 0;
    uint8_t *img = slurp(path, &len);
    assert_non_null(img);
    static const size_t cuts[] = {0, 10, 63, 64, 200, 4096};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        skp_err e = attach_elf_parse(img, cuts[i], names, 4, &info);
        assert_true(e == SKP_OK || e == SKP_EINVAL);
        assert_int_equal(info.values[0], 0);
    }
    uint8_t *bad = malloc(len);
    memcpy(bad, img, len);
    uint64_t far = (uint64_t)len + 4096;
    memcpy(bad + 0x28, &far, 8); /* e_shoff */
    assert_int_equal(attach_elf_parse(bad, len, names, 4, &info), SKP_EINVAL);
    memcpy(bad, "\177ELG", 4);
    assert_int_equal(attach_elf_parse(bad, len, names, 4, &info), SKP_EINVAL);
    free(bad);
    free(img);
    assert_int_not_equal(
        attach_elf_parse_file("/nonexistent/python", names, 1, &info, why, sizeof(why)), SKP_OK);
    assert_non_null(strstr(why, "/nonexistent/python"));
}

static void linetable_decodes(void **state)
{
    (void)state;
    /* entries: first byte 1 CCCC LLL (code, length-1 units), then code-specific varints.
     *  - code 13 (no columns), 2 units, line delta +3 (svarint 6)
     *  - code 10 (one line, delta 0), 1 unit, two column bytes
     *  - code 11 (one line, +1), 3 units, two column bytes
     *  - code 15 (no location), 1 unit
     *  - code 14 (long), 1 unit, delta -2 (svarint 5), end line delta, two column varints */
    // clang-format off
    static const uint8_t table[] = {
        0x80 | (13 << 3) | 1, 6,
        0x80 | (10 << 3) | 0, 4, 9,
        0x80 | (11 << 3) | 2, 0, 4,
        0x80 | (15 << 3) | 0,
        0x80 | (14 << 3) | 0, 5, 0, 1, 2,
    };
    // clang-format on
    static const struct {
        int addr;
        int line;
    } cases[] = {
        {-1, 100}, {0, 103}, {2, 103}, {4, 103}, {6, 104}, {10, 104}, {12, -1}, {14, 102}, {16, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = skpx_py_linetable_line(table, sizeof(table), 100, cases[i].addr);
        if (got != cases[i].line)
            fail_msg("addr %d: line %d, want %d", cases[i].addr, got, cases[i].line);
    }
    /* a copy that starts mid-entry is corrupt; an empty or NULL table knows nothing */
    assert_int_equal(skpx_py_linetable_line(table + 1, sizeof(table) - 1, 1, 0), -1);
    assert_int_equal(skpx_py_linetable_line(NULL, 0, 1, 0), -1);
    /* a long varint run never reads past the end */
    static const uint8_t runaway[] = {0x80 | (13 << 3), 0x7f, 0x7f, 0x7f};
    assert_int_equal(skpx_py_linetable_line(runaway, sizeof(runaway), 5, 0), -1);
}

static void profile_aggregates(void **state)
{
    (void)state;
    int64_t before = skpx_alloc_live_bytes();
    struct attach_profile p;
    assert_int_equal(attach_profile_init(&p), SKP_OK);
    const char *s1[] = {"main", "a", "b", "c"};
    const char *s2[] = {"main", "a", "b"};
    const char *s3[] = {"other"};
    for (int i = 0; i < 3; i++)
        attach_profile_add(&p, s1, 4);
    attach_profile_add(&p, s2, 3);
    attach_profile_add(&p, s3, 1);
    /* many distinct stacks: grows its tables */
    char names[3000][16];
    for (int i = 0; i < 3000; i++) {
        snprintf(names[i], sizeof(names[i]), "f%d", i);
        const char *s[] = {"main", names[i]};
        attach_profile_add(&p, s, 2);
    }
    assert_int_equal(p.n_samples, 3005);
    assert_int_equal(p.nodes[0].count, 3005);
    /* main -> a -> b -> c with counts 3003 / 4 / 4 / 3 */
    uint32_t main_id = p.nodes[0].first_child;
    assert_string_equal(p.labels[p.nodes[main_id].label], "main");
    assert_int_equal(p.nodes[main_id].count, 3004);
    uint32_t a = p.nodes[main_id].first_child;
    assert_string_equal(p.labels[p.nodes[a].label], "a");
    assert_int_equal(p.nodes[a].count, 4);
    uint32_t b = p.nodes[a].first_child;
    assert_int_equal(p.nodes[b].count, 4);
    uint32_t c = p.nodes[b].first_child;
    assert_string_equal(p.labels[p.nodes[c].label], "c");
    assert_int_equal(p.nodes[c].count, 3);
    assert_int_equal(p.nodes[c].first_child, ATTACH_PROFILE_NONE);
    uint32_t other = p.nodes[main_id].next_sibling;
    assert_string_equal(p.labels[p.nodes[other].label], "other");
    assert_int_equal(p.n_nodes, 1 + 4 + 1 + 3000);
    assert_int_equal(p.n_dropped, 0);
    attach_profile_cleanup(&p);
    assert_int_equal(skpx_alloc_live_bytes(), before);
}

/* One run of profile_survives_oom: 600 samples into a new profile (a sample that finds no memory
 * is dropped and counted). */
static skp_err profile_body(void *ctx, long k)
{
    (void)ctx;
    (void)k;
    struct attach_profile p;
    skp_err e = attach_profile_init(&p);
    if (e)
        return e;
    char names[600][16];
    for (int i = 0; i < 600; i++) {
        snprintf(names[i], sizeof(names[i]), "g%d", i);
        const char *s[] = {"root", names[i]};
        attach_profile_add(&p, s, 2);
    }
    assert_int_equal(p.n_samples + p.n_dropped, 600);
    attach_profile_cleanup(&p);
    return SKP_OK;
}

static void profile_survives_oom(void **state)
{
    (void)state;
    struct skp_alloc_fault_runs runs = skp_test_alloc_faults(profile_body, NULL, 10000);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
}

static void stat_ppid(void **state)
{
    (void)state;
    static const char a[] = "123 (python3) S 77 123 123 0 -1";
    assert_int_equal(attach_proc_stat_ppid(a, sizeof(a) - 1), 77);
    static const char b[] = "9 (we) ird) (name) R 4242 1 1";
    assert_int_equal(attach_proc_stat_ppid(b, sizeof(b) - 1), 4242);
    static const char c[] = "9 no paren S 1";
    assert_int_equal(attach_proc_stat_ppid(c, sizeof(c) - 1), -1);
    static const char d[] = "9 (x) S";
    assert_int_equal(attach_proc_stat_ppid(d, sizeof(d) - 1), -1);
    /* our own parent, through the real file. ctest -j runs other tests (and their children)
     * under the same parent, so the list must hold all of them: 8 was too few and flaky. */
    static pid_t kids[1024];
    size_t n = attach_proc_descendants(getppid(), kids, 1024);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found = found || kids[i] == getpid();
    assert_true(found);
}

static void remote_readv_skips_a_fault(void **state)
{
    (void)state;
    struct attach_remote r;
    char why[ATTACH_ERRMSG_MAX];
    static const char src1[] = "first";
    static const char src2[] = "third";
    assert_int_equal(attach_remote_init(&r, getpid(), (uintptr_t)src1, why, sizeof(why)), SKP_OK);
    char d1[6] = {0};
    char d2[8] = {0};
    char d3[6] = {0};
    struct iovec loc[3] = {{d1, 6}, {d2, 8}, {d3, 6}};
    struct iovec rem[3] = {{(void *)src1, 6}, {(void *)(uintptr_t)16, 8}, {(void *)src2, 6}};
    bool ok[3];
    assert_int_equal(attach_remote_readv(&r, loc, rem, 3, ok), 2);
    assert_true(ok[0]);
    assert_false(ok[1]);
    assert_true(ok[2]);
    assert_string_equal(d1, "first");
    assert_string_equal(d3, "third");
    assert_int_equal(r.n_faults, 1);
    assert_false(attach_remote_read(&r, 16, d1, 4));
    char hint[ATTACH_ERRMSG_MAX];
    attach_remote_eperm_hint(42, hint, sizeof(hint));
    assert_non_null(strstr(hint, "CAP_SYS_PTRACE"));
    assert_non_null(strstr(hint, "ptrace_scope"));
    assert_non_null(strstr(hint, "--cap-add SYS_PTRACE"));
    assert_int_equal(attach_remote_init(&r, 0x3ffffff0, 0, why, sizeof(why)), SKP_ENOTFOUND);
}

/* --native's merge rule: each _PyEval_EvalFrameDefault frame takes the Python frames of its
 * evaluation (up to the next entry frame), interpreter frames vanish, C frames stay where they
 * are, leftovers are appended, and the cap truncates. */
static void native_merge_rule(void **state)
{
    (void)state;
    assert_true(attach_native_is_eval("_PyEval_EvalFrameDefault"));
    assert_true(attach_native_is_eval("_PyEval_EvalFrameDefault.cold"));
    assert_false(attach_native_is_eval("_PyEval_EvalFrameDefaultX"));
    assert_false(attach_native_is_eval("PyEval_EvalCode"));
#define NF(n) ((struct attach_frame){.name = n, .file = "m.so", .line = -1, .native = true})
#define PF(n, e) ((struct attach_frame){.name = n, .file = "a.py", .line = 1, .entry = e})
    /* innermost first: eval#1 running cmp <- call glue <- ctypes closure <- qsort (C) <- call
     * glue <- eval#2 running caller and <module> <- startup */
    const struct attach_frame native[] = {NF("_PyEval_EvalFrameDefault"),
                                          NF("_PyFunction_Vectorcall"),
                                          NF("_CallPythonObject"),
                                          NF("qsort_r"),
                                          NF("_PyObject_MakeTpCall"),
                                          NF("_PyEval_EvalFrameDefault"),
                                          NF("Py_RunMain"),
                                          NF("__libc_start_main")};
    const bool is_eval[] = {true, false, false, false, false, true, false, false};
    const bool is_interp[] = {true, true, false, false, true, true, true, false};
    const struct attach_frame py[] = {PF("cmp", true), PF("caller", false), PF("<module>", true)};
    struct attach_frame out[16];
    bool trunc = true;
    size_t n = attach_native_merge(native, is_eval, is_interp, 8, py, 3, out, 16, &trunc);
    const char *want[] = {"cmp",    "_CallPythonObject", "qsort_r",
                          "caller", "<module>",          "__libc_start_main"};
    assert_int_equal(n, 6);
    assert_false(trunc);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(out[i].name, want[i]);
    /* an unwind cut short: the Python frames left over still show, outermost last */
    n = attach_native_merge(native, is_eval, is_interp, 3, py, 3, out, 16, &trunc);
    assert_int_equal(n, 4);
    assert_string_equal(out[0].name, "cmp");
    assert_string_equal(out[3].name, "<module>");
    /* no Python at all (a C process) and the cap */
    n = attach_native_merge(native, is_eval, is_interp, 8, NULL, 0, out, 2, &trunc);
    assert_int_equal(n, 2);
    assert_true(trunc);
    assert_string_equal(out[0].name, "_CallPythonObject");
#undef NF
#undef PF
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(maps_parse_lines),   cmocka_unit_test(maps_python_kind),
        cmocka_unit_test(elf_real_python),    cmocka_unit_test(linetable_decodes),
        cmocka_unit_test(profile_aggregates), cmocka_unit_test(profile_survives_oom),
        cmocka_unit_test(stat_ppid),          cmocka_unit_test(remote_readv_skips_a_fault),
        cmocka_unit_test(native_merge_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
