/* store_pg_refs.c - PostgreSQL backend: segment and task ids → numbers, de-duplicated frames
 * and stacks, and their reads, through bounded caches (struct pg_store; the stack cache:
 * store/store_stack_cache.h).
 *
 * Safe under concurrent collectors: a batch's new names / frames / stacks go in with ONE
 * "INSERT ... SELECT unnest(array) ORDER BY ... ON CONFLICT DO NOTHING" per table, then one
 * SELECT reads every id back. Under READ COMMITTED the INSERT waits for a concurrent
 * transaction inserting the same key and skips it once that one commits; the SELECT (a new
 * statement, a new snapshot) then sees the winner's row: each value gets one id whoever inserts
 * it, and no id is handed out for a row that was not written. Every batch inserts in the same
 * table order (segments, tasks, frames, stacks) and in sorted order within a table, so two
 * batches never wait on each other in a cycle. */
#include "server/store/postgres/store_pg_int.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/hex.h"
#include "common/log.h"
#include "server/store/store_codec.h"
#include "server/formats/utf8.h"

/* ---- small helpers ---- */

static void cache_put(struct skpx_strmap *cache, size_t max, const char *key, uint32_t id)
{
    if (cache->n >= max)
        skpx_strmap_clear(cache);
    if (skpx_strmap_put(cache, key, id) != SKP_OK) {
        /* only a cache: a failed put costs a lookup later */
    }
}

/* The text as stored: itself when valid UTF-8, else a sanitized copy in *fixed. */
static const char *stored_form(const char *s, char **fixed)
{
    *fixed = NULL;
    if (skp_utf8_valid(s, strlen(s)))
        return s;
    *fixed = skp_utf8_sanitize(s);
    return *fixed;
}

size_t pg__unhex(char *s)
{
    if (s[0] != '\\' || s[1] != 'x')
        return SIZE_MAX;
    size_t n = 0;
    for (const char *p = s + 2; p[0]; p += 2) {
        int hi = skpx_hex_value(p[0]), lo = p[1] ? skpx_hex_value(p[1]) : -1;
        if (hi < 0 || lo < 0)
            return SIZE_MAX;
        s[n++] = (char)(hi << 4 | lo);
    }
    return n;
}

static skp_err ensure_scratch(struct pg_store *st, size_t n)
{
    return skpx_grow(&st->scratch_ids, &st->scratch_cap, n, sizeof(*st->scratch_ids), 64);
}

/* ---- names: segment ids, task ids, frame signatures ---- */

/* One table of unique texts: `col` of `table` with an md5 unique index, id bigserial. */
struct name_table {
    const char *table;
    const char *col;
    bool with_first; /* segids: a first_ms column */
};
static const struct name_table k_segids = {"segids", "segment_id", true};
static const struct name_table k_task_keys = {"task_keys", "task_id", false};
static const struct name_table k_frames = {"frames", "sig", false};

/* Inserts the n texts (raw: as the agent sent them) missing from `t` and reads every id back:
 * ids[i] (and firsts[i] when with_first: the stored first_ms; first[i] is used for new rows).
 * Errors: SKP_EIO (a row could not be read back), SKP_ENOMEM. */
static skp_err upsert_names(struct pg_store *st, const struct name_table *t, const char *const *raw,
                            const int64_t *first, size_t n, uint32_t *ids, int64_t *firsts)
{
    struct pg_buf names = {0}, times = {0};
    struct skpx_strmap rows = {0};
    PGresult *r = NULL;
    skp_err err = SKP_OK;
    pgb_putc(&names, '{');
    pgb_putc(&times, '{');
    for (size_t i = 0; i < n; i++) {
        if (i) {
            pgb_putc(&names, ',');
            pgb_putc(&times, ',');
        }
        pgb_elem(&names, raw[i]);
        pgb_int(&times, first ? first[i] : 0);
    }
    pgb_putc(&names, '}');
    pgb_putc(&times, '}');
    char sql[512];
    struct pg_params p = {0};
    pgp_owned(&p, pgb_take(&names));
    if (t->with_first) {
        pgp_owned(&p, pgb_take(&times));
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s(%s, first_ms) SELECT n, f FROM unnest($1::text[], $2::bigint[]) "
                 "AS v(n, f) ORDER BY n COLLATE \"C\" ON CONFLICT DO NOTHING",
                 t->table, t->col);
    } else {
        skpx_free(pgb_take(&times));
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s(%s) SELECT n FROM unnest($1::text[]) AS v(n) "
                 "ORDER BY n COLLATE \"C\" ON CONFLICT DO NOTHING",
                 t->table, t->col);
    }
    r = pg__exec(st, sql, &p, &err, "insert names");
    PQclear(r);
    if (err)
        goto out;
    snprintf(sql, sizeof(sql),
             "SELECT id, %s%s FROM %s WHERE md5(%s) IN (SELECT md5(n) FROM unnest($1::text[]) n)",
             t->col, t->with_first ? ", first_ms" : "", t->table, t->col);
    p.n = 1; /* the names again; the times' text is freed below with the params */
    r = pg__exec(st, sql, &p, &err, "read names");
    p.n = t->with_first ? 2 : 1;
    if (!r)
        goto out;
    for (int i = 0; i < PQntuples(r); i++) {
        if (skpx_strmap_put(&rows, pg__txt(r, i, 1), (uint32_t)i) != SKP_OK) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        char *fixed = NULL;
        const char *key = stored_form(raw[i], &fixed);
        uint32_t row;
        bool found = key && skpx_strmap_get(&rows, key, &row);
        skpx_free(fixed);
        if (!key) {
            err = SKP_ENOMEM;
            goto out;
        }
        if (!found) {
            SKPX_ERROR("store: a new %s row could not be read back", t->table);
            err = SKP_EIO;
            goto out;
        }
        ids[i] = (uint32_t)pg__i64(r, (int)row, 0);
        if (firsts)
            firsts[i] = pg__i64(r, (int)row, 2);
    }
out:
    PQclear(r);
    pgp_free(&p);
    skpx_strmap_cleanup(&rows);
    return err;
}

/* A list of distinct texts missing from a cache, with where each request wants its id. */
struct missing {
    struct skpx_strmap idx; /* raw text → index in names */
    const char **names;     /* borrowed from the requests */
    int64_t *first;
    size_t n, cap;
};

static skp_err missing_add(struct missing *m, const char *name, int64_t first)
{
    uint32_t at;
    if (skpx_strmap_get(&m->idx, name, &at))
        return SKP_OK;
    size_t cap = m->cap;
    if (skpx_grow(&m->names, &m->cap, m->n + 1, sizeof(*m->names), 16))
        return SKP_ENOMEM;
    if (m->cap != cap) {
        int64_t *f = skpx_realloc(m->first, m->cap * sizeof(*f));
        if (!f)
            return SKP_ENOMEM;
        m->first = f;
    }
    if (skpx_strmap_put(&m->idx, name, (uint32_t)m->n) != SKP_OK)
        return SKP_ENOMEM;
    m->names[m->n] = name;
    m->first[m->n] = first;
    m->n++;
    return SKP_OK;
}

static void missing_cleanup(struct missing *m)
{
    skpx_strmap_cleanup(&m->idx);
    skpx_free(m->names);
    skpx_free(m->first);
    memset(m, 0, sizeof(*m));
}

/* Resolves the missing names of `m` into `cache` (and seg_first for segids). */
static skp_err resolve_missing(struct pg_store *st, const struct name_table *t, struct missing *m,
                               struct skpx_strmap *cache)
{
    if (m->n == 0)
        return SKP_OK;
    uint32_t *ids = skpx_calloc(m->n, sizeof(*ids));
    int64_t *firsts = t->with_first ? skpx_calloc(m->n, sizeof(*firsts)) : NULL;
    skp_err err = ids && (!t->with_first || firsts) ? SKP_OK : SKP_ENOMEM;
    if (!err)
        err = upsert_names(st, t, m->names, m->first, m->n, ids, firsts);
    /* pg__resolve made room: these puts do not clear the caches */
    for (size_t i = 0; i < m->n && !err; i++) {
        if (skpx_strmap_put(cache, m->names[i], ids[i]) != SKP_OK ||
            (firsts && skpx_u64map_put(&st->seg_first, ids[i], (uint64_t)firsts[i]) != SKP_OK))
            err = SKP_ENOMEM;
    }
    skpx_free(ids);
    skpx_free(firsts);
    return err;
}

/* A segment's id and first_ms from the caches; false when either is missing. */
static bool seg_cached(struct pg_store *st, const char *segment_id, uint32_t *id, int64_t *first)
{
    uint64_t f;
    if (!skpx_strmap_get(&st->seg_ids, segment_id, id) || !skpx_u64map_get(&st->seg_first, *id, &f))
        return false;
    *first = (int64_t)f;
    return true;
}

/* ---- stacks ---- */

/* Frames of one request → ids in st->scratch_ids (frames already resolved). */
static skp_err frame_ids_of(struct pg_store *st, char *const *frames, size_t n)
{
    skp_err err = ensure_scratch(st, n ? n : 1);
    for (size_t i = 0; i < n && !err; i++) {
        if (!skpx_strmap_get(&st->frame_ids, frames[i] ? frames[i] : "", &st->scratch_ids[i]))
            err = SKP_ESTATE; /* the frame pass left it out: a bug */
    }
    return err;
}

struct new_stack {
    uint8_t *blob;
    size_t len;
    uint32_t *ids;
    size_t n;
    uint32_t id;
};

/* Inserts the new stacks and reads their ids back (same scheme as the names). */
static skp_err upsert_stacks(struct pg_store *st, struct new_stack *v, size_t n)
{
    struct pg_buf arr = {0};
    struct skpx_u64map by_hash = {0};
    PGresult *r = NULL;
    skp_err err = SKP_OK;
    pgb_putc(&arr, '{');
    for (size_t i = 0; i < n; i++) {
        if (i)
            pgb_putc(&arr, ',');
        pgb_bytea_elem(&arr, v[i].blob, v[i].len);
        if (skpx_u64map_put(&by_hash, skpx_hash_bytes(v[i].blob, v[i].len), i) != SKP_OK)
            err = SKP_ENOMEM;
    }
    pgb_putc(&arr, '}');
    struct pg_params p = {0};
    pgp_owned(&p, pgb_take(&arr));
    if (err)
        goto out;
    r = pg__exec(st,
                 "INSERT INTO stacks(frames) SELECT f FROM unnest($1::bytea[]) AS v(f) "
                 "ORDER BY f ON CONFLICT DO NOTHING",
                 &p, &err, "insert stacks");
    PQclear(r);
    r = NULL;
    if (err)
        goto out;
    r = pg__exec(st,
                 "SELECT id, frames FROM stacks WHERE md5(frames) IN "
                 "(SELECT md5(f) FROM unnest($1::bytea[]) f)",
                 &p, &err, "read stacks");
    if (!r)
        goto out;
    for (int i = 0; i < PQntuples(r); i++) {
        char *b = PQgetvalue(r, i, 1);
        size_t len = pg__unhex(b);
        uint64_t at;
        if (len == SIZE_MAX || !skpx_u64map_get(&by_hash, skpx_hash_bytes(b, len), &at))
            continue;
        if (v[at].len == len && (len == 0 || memcmp(v[at].blob, b, len) == 0))
            v[at].id = (uint32_t)pg__i64(r, i, 0);
    }
    for (size_t i = 0; i < n; i++) {
        if (!v[i].id) {
            SKPX_ERROR("store: a new stack could not be read back");
            err = SKP_EIO;
            break;
        }
    }
out:
    PQclear(r);
    pgp_free(&p);
    skpx_u64map_cleanup(&by_hash);
    return err;
}

static skp_err resolve_stacks(struct pg_store *st, struct pg_ref_req *v, size_t n)
{
    struct new_stack *nv = NULL;
    size_t nn = 0, cap = 0;
    uint32_t *want = skpx_calloc(n ? n : 1, sizeof(*want)); /* request → index in nv + 1 */
    struct skpx_u64map seen = {0};                          /* hash of ids → index in nv + 1 */
    skp_err err = want ? SKP_OK : SKP_ENOMEM;
    for (size_t i = 0; i < n && !err; i++) {
        if (v[i].n_frames == SIZE_MAX)
            continue;
        size_t nf = v[i].n_frames < PG_MAX_FRAMES ? v[i].n_frames : PG_MAX_FRAMES;
        err = frame_ids_of(st, v[i].frames, nf);
        if (err)
            break;
        if (store_stack_cache_find(&st->stack_cache, st->scratch_ids, nf, &v[i].stack))
            continue;
        uint64_t h = skpx_hash_u32s(st->scratch_ids, nf), at;
        if (skpx_u64map_get(&seen, h, &at) && nv[at - 1].n == nf &&
            (nf == 0 || memcmp(nv[at - 1].ids, st->scratch_ids, nf * sizeof(uint32_t)) == 0)) {
            want[i] = (uint32_t)at;
            continue;
        }
        if (skpx_grow(&nv, &cap, nn + 1, sizeof(*nv), 16)) {
            err = SKP_ENOMEM;
            break;
        }
        struct new_stack *s = &nv[nn];
        memset(s, 0, sizeof(*s));
        s->ids = skpx_malloc((nf ? nf : 1) * sizeof(uint32_t));
        s->blob = skpx_malloc(nf * 5 + 1);
        if (!s->ids || !s->blob) {
            skpx_free(s->ids);
            skpx_free(s->blob);
            err = SKP_ENOMEM;
            break;
        }
        if (nf)
            memcpy(s->ids, st->scratch_ids, nf * sizeof(uint32_t));
        s->n = nf;
        s->len = store_encode_ids(s->ids, nf, s->blob);
        nn++;
        want[i] = (uint32_t)nn;
        if (skpx_u64map_put(&seen, h, nn) != SKP_OK)
            err = SKP_ENOMEM;
    }
    if (!err && nn)
        err = upsert_stacks(st, nv, nn);
    for (size_t i = 0; i < n && !err; i++)
        if (want[i])
            v[i].stack = nv[want[i] - 1].id;
    for (size_t i = 0; i < nn; i++) {
        if (!err)
            (void)store_stack_cache_add(&st->stack_cache, nv[i].id, nv[i].ids, nv[i].n);
        skpx_free(nv[i].ids);
        skpx_free(nv[i].blob);
    }
    skpx_free(nv);
    skpx_free(want);
    skpx_u64map_cleanup(&seen);
    return err;
}

/* ---- the batch ---- */

/* Collects the frames of the requests missing from the frame cache. */
static skp_err collect_frames(struct pg_store *st, const struct pg_ref_req *v, size_t n,
                              struct missing *frames)
{
    skp_err err = SKP_OK;
    for (size_t i = 0; i < n && !err; i++) {
        if (v[i].n_frames == SIZE_MAX)
            continue;
        size_t nf = v[i].n_frames < PG_MAX_FRAMES ? v[i].n_frames : PG_MAX_FRAMES;
        for (size_t f = 0; f < nf && !err; f++) {
            const char *sig = v[i].frames[f] ? v[i].frames[f] : "";
            uint32_t id;
            if (!skpx_strmap_get(&st->frame_ids, sig, &id))
                err = missing_add(frames, sig, 0);
        }
    }
    return err;
}

skp_err pg__ref_reqs(struct pg_store *st, size_t n, struct pg_ref_req **out)
{
    *out = NULL;
    skp_err err = pg__ready(st);
    if (err)
        return err;
    *out = skpx_calloc(n, sizeof(**out));
    return *out ? SKP_OK : SKP_ENOMEM;
}

skp_err pg__resolve(struct pg_store *st, struct pg_ref_req *v, size_t n)
{
    struct missing segs = {0}, tasks = {0}, frames = {0};
    skp_err err = SKP_OK;
    /* Caches are cleared BEFORE a batch that could overflow them, never during one. */
    if (st->seg_ids.n + n > PG_NAME_CACHE_MAX || st->seg_first.n + n > PG_NAME_CACHE_MAX) {
        skpx_strmap_clear(&st->seg_ids);
        skpx_u64map_clear(&st->seg_first);
    }
    if (st->task_keys.n + n > PG_NAME_CACHE_MAX)
        skpx_strmap_clear(&st->task_keys);
    for (size_t i = 0; i < n && !err; i++) {
        int64_t first;
        if (!seg_cached(st, v[i].segment_id, &v[i].seg, &first))
            err = missing_add(&segs, v[i].segment_id, v[i].first_ms);
        if (!err && v[i].task_id && !skpx_strmap_get(&st->task_keys, v[i].task_id, &v[i].task))
            err = missing_add(&tasks, v[i].task_id, 0);
    }
    if (!err)
        err = collect_frames(st, v, n, &frames);
    if (!err && st->frame_ids.n + frames.n > PG_FRAME_CACHE_MAX) {
        skpx_strmap_clear(&st->frame_ids);
        missing_cleanup(&frames);
        err = collect_frames(st, v, n, &frames);
        if (!err && frames.n > PG_FRAME_CACHE_MAX)
            err = SKP_ENOMEM; /* one batch with more distinct frames than the cache holds */
    }
    if (!err)
        err = resolve_missing(st, &k_segids, &segs, &st->seg_ids);
    if (!err)
        err = resolve_missing(st, &k_task_keys, &tasks, &st->task_keys);
    if (!err)
        err = resolve_missing(st, &k_frames, &frames, &st->frame_ids);
    for (size_t i = 0; i < n && !err; i++) {
        int64_t first = 0;
        if (!seg_cached(st, v[i].segment_id, &v[i].seg, &first))
            err = SKP_ESTATE;
        v[i].seg_first_ms = first;
        if (!err && v[i].task_id && !skpx_strmap_get(&st->task_keys, v[i].task_id, &v[i].task))
            err = SKP_ESTATE;
    }
    if (!err)
        err = resolve_stacks(st, v, n);
    missing_cleanup(&segs);
    missing_cleanup(&tasks);
    missing_cleanup(&frames);
    if (err == SKP_ESTATE) {
        SKPX_ERROR("store: a batch's references were not all resolved");
        err = SKP_EIO;
    }
    return err;
}

bool pg__resolve_cached(struct pg_store *st, struct pg_ref_req *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!seg_cached(st, v[i].segment_id, &v[i].seg, &v[i].seg_first_ms))
            return false;
        if (v[i].task_id && !skpx_strmap_get(&st->task_keys, v[i].task_id, &v[i].task))
            return false;
        if (v[i].n_frames == SIZE_MAX)
            continue;
        size_t nf = v[i].n_frames < PG_MAX_FRAMES ? v[i].n_frames : PG_MAX_FRAMES;
        if (ensure_scratch(st, nf ? nf : 1) != SKP_OK)
            return false;
        for (size_t f = 0; f < nf; f++)
            if (!skpx_strmap_get(&st->frame_ids, v[i].frames[f] ? v[i].frames[f] : "",
                                 &st->scratch_ids[f]))
                return false;
        if (!store_stack_cache_find(&st->stack_cache, st->scratch_ids, nf, &v[i].stack))
            return false;
    }
    return true;
}

static skp_err find_name(struct pg_store *st, enum pg_stmt stmt, struct skpx_strmap *cache,
                         const char *name, uint32_t *out, int64_t *first)
{
    if (!first && skpx_strmap_get(cache, name, out))
        return SKP_OK;
    struct pg_params p = {0};
    pgp_text(&p, name);
    skp_err err = SKP_OK;
    PGresult *r = pg__execp(st, stmt, &p, &err, "find name");
    pgp_free(&p);
    if (!r)
        return err;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return SKP_ENOTFOUND;
    }
    *out = (uint32_t)pg__i64(r, 0, 0);
    if (first)
        *first = pg__i64(r, 0, 1);
    PQclear(r);
    cache_put(cache, PG_NAME_CACHE_MAX, name, *out);
    return SKP_OK;
}

skp_err pg__segment_find(struct pg_store *st, const char *segment_id, uint32_t *out,
                         int64_t *first_ms)
{
    if (!segment_id)
        return SKP_EINVAL;
    skp_err err = pg__ready(st);
    if (err)
        return err;
    int64_t first;
    if (seg_cached(st, segment_id, out, &first)) {
        if (first_ms)
            *first_ms = first;
        return SKP_OK;
    }
    err = find_name(st, PGS_SEG_FIND, &st->seg_ids, segment_id, out, &first);
    if (err)
        return err;
    if (st->seg_first.n >= PG_NAME_CACHE_MAX)
        skpx_u64map_clear(&st->seg_first); /* ids whose first_ms is gone are looked up again */
    if (skpx_u64map_put(&st->seg_first, *out, (uint64_t)first) != SKP_OK) {
        /* only a cache */
    }
    if (first_ms)
        *first_ms = first;
    return SKP_OK;
}

skp_err pg__task_key_find(struct pg_store *st, const char *task_id, uint32_t *out)
{
    skp_err err = pg__ready(st);
    if (err)
        return err;
    return find_name(st, PGS_TASKKEY_FIND, &st->task_keys, task_id, out, NULL);
}

/* ---- reads ---- */

/* Caches a stack row (id, frames as bytea text); returns its frames or NULL. */
static skp_err cache_stack_row(struct pg_store *st, uint32_t id, char *hex, const uint32_t **out,
                               size_t *n)
{
    size_t len = pg__unhex(hex);
    if (len == SIZE_MAX) {
        SKPX_ERROR("store: stack %u is corrupt", id);
        return SKP_EIO;
    }
    skp_err err = ensure_scratch(st, len ? len : 1);
    if (err)
        return err;
    size_t cnt = store_decode_ids((const uint8_t *)hex, len, st->scratch_ids, len);
    if (cnt == SIZE_MAX) {
        SKPX_ERROR("store: stack %u is corrupt", id);
        return SKP_EIO;
    }
    const uint32_t *cached = store_stack_cache_add(&st->stack_cache, id, st->scratch_ids, cnt);
    if (out) {
        *out = cached ? cached : st->scratch_ids;
        *n = cnt;
    }
    return SKP_OK;
}

/* The ids one prefetch query asks for, as an array literal: each once, none already cached. */
struct id_ask {
    struct pg_buf arr;
    struct skpx_u64map asked;
    size_t n;
};

/* Adds id unless the cache index `cached` has it or it is asked already. */
static skp_err id_ask_add(struct id_ask *a, const struct skpx_u64map *cached, uint32_t id)
{
    uint64_t dummy;
    if (skpx_u64map_get(cached, id, &dummy) || skpx_u64map_get(&a->asked, id, &dummy))
        return SKP_OK;
    if (skpx_u64map_put(&a->asked, id, 1) != SKP_OK)
        return SKP_ENOMEM;
    pgb_putc(&a->arr, a->n++ ? ',' : '{');
    pgb_int(&a->arr, id);
    return SKP_OK;
}

/* The array literal of the ids added (owned; NULL: out of memory); the list is empty again. */
static char *id_ask_take(struct id_ask *a)
{
    if (a->n == 0)
        pgb_putc(&a->arr, '{');
    pgb_putc(&a->arr, '}');
    a->n = 0;
    skpx_u64map_clear(&a->asked);
    return pgb_take(&a->arr);
}

skp_err pg__prefetch_stacks(struct pg_store *st, const uint32_t *ids, size_t n)
{
    struct id_ask ask = {0};
    skp_err err = SKP_OK;
    for (size_t i = 0; i < n && !err; i++)
        err = id_ask_add(&ask, &st->stack_cache.by_id, ids[i]);
    size_t k = ask.n;
    struct pg_params p = {0};
    pgp_owned(&p, id_ask_take(&ask));
    PGresult *r = NULL;
    if (err || k == 0)
        goto out;
    r = pg__exec(st, "SELECT id, frames FROM stacks WHERE id = ANY($1::bigint[])", &p, &err,
                 "read stacks");
    if (!r)
        goto out;
    /* then the frames of those stacks whose signatures are not cached */
    for (int i = 0; i < PQntuples(r) && !err; i++) {
        const uint32_t *fr = NULL;
        size_t cnt = 0;
        err = cache_stack_row(st, (uint32_t)pg__i64(r, i, 0), PQgetvalue(r, i, 1), &fr, &cnt);
        for (size_t j = 0; j < cnt && !err; j++)
            err = id_ask_add(&ask, &st->frame_sigs.idx, fr[j]);
    }
    size_t nf = ask.n;
    PQclear(r);
    r = NULL;
    pgp_free(&p);
    pgp_owned(&p, id_ask_take(&ask));
    if (err || nf == 0)
        goto out;
    r = pg__exec(st, "SELECT id, sig FROM frames WHERE id = ANY($1::bigint[])", &p, &err,
                 "read frames");
    for (int i = 0; r && i < PQntuples(r) && !err; i++)
        err = store_frame_sigs_add(&st->frame_sigs, (uint32_t)pg__i64(r, i, 0), pg__txt(r, i, 1),
                                   NULL);
out:
    PQclear(r);
    pgp_free(&p);
    skpx_u64map_cleanup(&ask.asked);
    return err;
}

/* The row of the prepared statement `id` for one key ($1), after pg__ready: NULL with *err set
 * when it failed, or SKP_ENOTFOUND when there is no such row. The caller PQclear()s it. */
static PGresult *read_by_key(struct pg_store *st, enum pg_stmt id, uint32_t key, skp_err *err,
                             const char *what)
{
    *err = pg__ready(st);
    if (*err)
        return NULL;
    struct pg_params p = {0};
    pgp_int(&p, key);
    PGresult *r = pg__execp(st, id, &p, err, what);
    pgp_free(&p);
    if (r && PQntuples(r) == 0) {
        PQclear(r);
        *err = SKP_ENOTFOUND;
        return NULL;
    }
    return r;
}

skp_err pg_store_get_stack(struct store *base, uint32_t stack, const uint32_t **frames, size_t *n)
{
    struct pg_store *st = pg_store_of(base);
    *frames = NULL;
    *n = 0;
    if (store_stack_cache_get(&st->stack_cache, stack, frames, n))
        return SKP_OK;
    skp_err err;
    PGresult *r = read_by_key(st, PGS_STACK_GET, stack, &err, "read stack");
    if (!r)
        return err;
    err = cache_stack_row(st, stack, PQgetvalue(r, 0, 0), frames, n);
    PQclear(r);
    return err;
}

skp_err pg_store_get_frame(struct store *base, uint32_t frame, const char **sig)
{
    struct pg_store *st = pg_store_of(base);
    *sig = NULL;
    if (store_frame_sigs_get(&st->frame_sigs, frame, sig))
        return SKP_OK;
    skp_err err;
    PGresult *r = read_by_key(st, PGS_FRAME_SIG, frame, &err, "read frame");
    if (!r)
        return err;
    err = store_frame_sigs_add(&st->frame_sigs, frame, pg__txt(r, 0, 0), sig);
    PQclear(r);
    return err;
}
