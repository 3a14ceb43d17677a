/* store_sqlite_stacks.c - SQLite backend: name → id references (segment and task ids become
 * small integers) and de-duplicated frames and stacks, through the bounded caches of
 * struct sqlite_store (store_int.h; the stack cache: store/store_stack_cache.h).
 * Single-threaded. */
#include "server/store/store.h"

#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/log.h"
#include "server/store/store_codec.h"
#include "server/store/sqlite/store_int.h"
#include "server/formats/utf8.h"

/* ---- name → id references (segments, task keys) ---- */

/* SELECT-or-INSERT of a text key through the statements `get` (key → id) and `ins` (key, and
 * first_ms for segids), inside the caller's transaction. SKP_ENOTFOUND when absent and
 * !create. */
static skp_err select_or_insert(struct sqlite_store *st, enum store_stmt get, enum store_stmt ins,
                                const char *key, bool create, int64_t first_ms, uint32_t *out)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, get, &err);
    if (!s)
        return err;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = (uint32_t)sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return SKP_OK;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, "look a name up");
    if (!create)
        return SKP_ENOTFOUND;
    s = store__stmt(st, ins, &err);
    if (!s)
        return err;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    if (ins == STMT_SEGID_INS)
        sqlite3_bind_int64(s, 2, first_ms);
    err = store__step_done(st, s, "insert a name");
    if (err)
        return err;
    *out = (uint32_t)sqlite3_last_insert_rowid(st->db);
    return SKP_OK;
}

/* Remembers key → id in a lookup cache, clearing it first when it holds `max` entries. */
static void cache_put(struct skpx_strmap *cache, size_t max, const char *key, uint32_t id)
{
    if (cache->n >= max)
        skpx_strmap_clear(cache);
    if (skpx_strmap_put(cache, key, id) != SKP_OK) {
        /* only a cache: a failed put costs a lookup later */
    }
}

/* Finds `name` through cache → SELECT; when `create`, INSERTs it (inside the caller's
 * transaction). SKP_ENOTFOUND when absent and !create. */
static skp_err name_ref(struct sqlite_store *st, struct skpx_strmap *cache, enum store_stmt get,
                        enum store_stmt ins, const char *name, bool create, int64_t first_ms,
                        uint32_t *out)
{
    if (skpx_strmap_get(cache, name, out))
        return SKP_OK;
    skp_err err = select_or_insert(st, get, ins, name, create, first_ms, out);
    if (err)
        return err;
    cache_put(cache, STORE_NAME_CACHE_MAX, name, *out);
    return SKP_OK;
}

skp_err store__segment_ref(struct sqlite_store *st, const char *segment_id, int64_t first_ms,
                           uint32_t *out)
{
    return name_ref(st, &st->seg_ids, STMT_SEGID_GET, STMT_SEGID_INS, segment_id, true, first_ms,
                    out);
}

skp_err store__segment_find(struct sqlite_store *st, const char *segment_id, uint32_t *out)
{
    if (!segment_id)
        return SKP_EINVAL;
    return name_ref(st, &st->seg_ids, STMT_SEGID_GET, STMT_SEGID_INS, segment_id, false, 0, out);
}

skp_err store__task_key(struct sqlite_store *st, const char *task_id, bool create, uint32_t *out)
{
    return name_ref(st, &st->task_keys, STMT_TASKKEY_GET, STMT_TASKKEY_INS, task_id, create, 0,
                    out);
}

/* ---- frames and stacks ---- */

static skp_err frame_ref(struct sqlite_store *st, const char *raw, uint32_t *out)
{
    if (skpx_strmap_get(&st->frame_ids, raw, out))
        return SKP_OK;
    /* Stored signatures are valid UTF-8 (they end up in JSON); the cache keeps the raw form. */
    char *fixed = NULL;
    const char *sig = raw;
    if (!skp_utf8_valid(raw, strlen(raw))) {
        fixed = skp_utf8_sanitize(raw);
        if (!fixed)
            return SKP_ENOMEM;
        sig = fixed;
    }
    skp_err err = select_or_insert(st, STMT_FRAME_GET, STMT_FRAME_INS, sig, true, 0, out);
    skpx_free(fixed);
    if (err)
        return err;
    cache_put(&st->frame_ids, STORE_FRAME_CACHE_MAX, raw, *out);
    return SKP_OK;
}

skp_err store__ensure_scratch(struct sqlite_store *st, size_t n_ids)
{
    skp_err err =
        skpx_grow(&st->scratch_ids, &st->scratch_cap, n_ids, sizeof(*st->scratch_ids), 64);
    if (!err) /* an encoded id takes at most 5 bytes */
        err = skpx_grow(&st->scratch_blob, &st->scratch_blob_cap, n_ids * 5, 1, 64 * 5);
    return err;
}

skp_err store__stack_ref(struct sqlite_store *st, char *const *frames, size_t n_frames,
                         uint32_t *out)
{
    size_t n = n_frames < STORE_MAX_FRAMES ? n_frames : STORE_MAX_FRAMES;
    skp_err err = store__ensure_scratch(st, n ? n : 1);
    if (err)
        return err;
    uint32_t *ids = st->scratch_ids;
    for (size_t i = 0; i < n; i++) {
        err = frame_ref(st, frames[i] ? frames[i] : "", &ids[i]);
        if (err)
            return err;
    }
    if (store_stack_cache_find(&st->stack_cache, ids, n, out))
        return SKP_OK;
    uint64_t hash = skpx_hash_u32s(ids, n);
    size_t blob_len = store_encode_ids(ids, n, st->scratch_blob);
    sqlite3_stmt *s = store__stmt(st, STMT_STACK_BY_HASH, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)hash);
    int rc;
    bool found = false;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const void *b = sqlite3_column_blob(s, 1);
        size_t bl = (size_t)sqlite3_column_bytes(s, 1);
        if (bl == blob_len && (bl == 0 || memcmp(b, st->scratch_blob, bl) == 0)) {
            *out = (uint32_t)sqlite3_column_int64(s, 0);
            found = true;
            break;
        }
    }
    sqlite3_reset(s);
    if (!found && rc != SQLITE_DONE)
        return store__sqlerr(st, rc, "find stack");
    if (!found) {
        s = store__stmt(st, STMT_STACK_INS, &err);
        if (!s)
            return err;
        sqlite3_bind_int64(s, 1, (sqlite3_int64)hash);
        if (blob_len)
            sqlite3_bind_blob(s, 2, st->scratch_blob, (int)blob_len, SQLITE_STATIC);
        else
            sqlite3_bind_zeroblob(s, 2, 0);
        err = store__step_done(st, s, "insert stack");
        if (err)
            return err;
        *out = (uint32_t)sqlite3_last_insert_rowid(st->db);
    }
    (void)store_stack_cache_add(&st->stack_cache, *out, ids, n);
    return SKP_OK;
}

/* Steps the cached statement `which` with ?1 = id to its row, *out (the caller resets it after
 * reading the row); SKP_ENOTFOUND when there is none (`what` names a failure in the log). */
static skp_err row_by_id(struct sqlite_store *st, enum store_stmt which, uint32_t id,
                         const char *what, sqlite3_stmt **out)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, which, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? SKP_ENOTFOUND : store__sqlerr(st, rc, what);
    }
    *out = s;
    return SKP_OK;
}

skp_err sqlite_store_get_stack(struct store *base, uint32_t stack, const uint32_t **frames,
                               size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *frames = NULL;
    *n = 0;
    if (store_stack_cache_get(&st->stack_cache, stack, frames, n))
        return SKP_OK;
    sqlite3_stmt *s = NULL;
    skp_err err = row_by_id(st, STMT_STACK_GET, stack, "read stack", &s);
    if (err)
        return err;
    const uint8_t *b = sqlite3_column_blob(s, 0);
    size_t bl = (size_t)sqlite3_column_bytes(s, 0);
    /* every id takes at least one byte, so bl bounds the count */
    err = store__ensure_scratch(st, bl ? bl : 1);
    if (err) {
        sqlite3_reset(s);
        return err;
    }
    size_t cnt = store_decode_ids(b, bl, st->scratch_ids, bl);
    sqlite3_reset(s);
    if (cnt == SIZE_MAX) {
        SKPX_ERROR("store: stack %u is corrupt", stack);
        return SKP_EIO;
    }
    const uint32_t *cached = store_stack_cache_add(&st->stack_cache, stack, st->scratch_ids, cnt);
    *frames = cached ? cached : st->scratch_ids;
    *n = cnt;
    return SKP_OK;
}

skp_err sqlite_store_get_frame(struct store *base, uint32_t frame, const char **sig)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *sig = NULL;
    if (store_frame_sigs_get(&st->frame_sigs, frame, sig))
        return SKP_OK;
    sqlite3_stmt *s = NULL;
    skp_err err = row_by_id(st, STMT_FRAME_SIG, frame, "read frame", &s);
    if (err)
        return err;
    err = store_frame_sigs_add(&st->frame_sigs, frame, store__col_text(s, 0), sig);
    sqlite3_reset(s);
    return err;
}
