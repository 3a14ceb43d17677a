/* jfr_int.h - types shared by the files of the JFR parser (jfr_reader.c, jfr_metadata.c,
 * jfr_constpool.c, jfr_parse.c): the bounds-checked byte cursor, the
 * metadata model of one chunk and the per-chunk state. Nothing here is used outside jfr_*.c.
 *
 * Every read goes through struct jfr_cursor: a read past `end` sets `bad` and returns 0, so
 * callers check `bad` once per record instead of after each byte. Single-threaded. */
#ifndef SKP_SERVER_JFR_INT_H
#define SKP_SERVER_JFR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/map.h"
#include "server/formats/jfr.h"

#define JFR_HEADER_BYTES 68u
#define JFR_MAX_TYPES 65536u /* a JDK 17 chunk declares ~200 */
#define JFR_MAX_FIELDS (1u << 20)
#define JFR_MAX_META_STRINGS (1u << 20)
#define JFR_MAX_ELEMENT_DEPTH 32 /* root > metadata > class > field > annotation is 5 */
#define JFR_MAX_VALUE_DEPTH 16   /* nested inline structs (StackFrame inside StackTrace) */
#define JFR_FLAG_COMPRESSED_INTS 1u

/* ---- cursor (jfr_reader.c) ---- */

struct jfr_cursor {
    const uint8_t *base; /* chunk start: offsets in errors are relative to it */
    const uint8_t *p;
    const uint8_t *end;
    bool compressed; /* integers are LEB128-style varints (chunk flag bit 0) */
    bool bad;        /* a read ran past end or met an invalid encoding */
};

/* A string as found in the data: inline bytes, or a reference into the String pool. */
enum jfr_str_enc {
    JFR_STR_NULL = 0,
    JFR_STR_EMPTY = 1,
    JFR_STR_POOL = 2,
    JFR_STR_UTF8 = 3,
    JFR_STR_CHARS = 4, /* UTF-16 code units, each a varint */
    JFR_STR_LATIN1 = 5,
};

struct jfr_str {
    enum jfr_str_enc enc;
    const uint8_t *ptr; /* UTF8/LATIN1: the bytes; CHARS: the first varint */
    uint32_t len;       /* bytes (UTF8/LATIN1) or chars (CHARS) */
    int64_t pool_key;   /* POOL */
};

/* Remaining bytes. */
static inline size_t jfr_left(const struct jfr_cursor *c)
{
    return (size_t)(c->end - c->p);
}

/* The integer readers are inline: they are most of the parser's time. */
static inline uint8_t jfr_u8(struct jfr_cursor *c)
{
    if (c->p >= c->end) {
        c->bad = true;
        return 0;
    }
    return *c->p++;
}

/* n_bytes (1..8) big-endian, sign-extended. */
static inline int64_t jfr_be(struct jfr_cursor *c, unsigned n_bytes)
{
    if (jfr_left(c) < n_bytes) {
        c->bad = true;
        c->p = c->end;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n_bytes; i++)
        v = v << 8 | c->p[i];
    c->p += n_bytes;
    if (n_bytes < 8 && (v >> (n_bytes * 8 - 1)) & 1)
        v |= ~0ull << (n_bytes * 8);
    return (int64_t)v;
}

static inline int64_t jfr_varint(struct jfr_cursor *c)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++) {
        if (c->p >= c->end) {
            c->bad = true;
            return 0;
        }
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            return (int64_t)v;
    }
    if (c->p >= c->end) {
        c->bad = true;
        return 0;
    }
    v |= (uint64_t)*c->p++ << 56;
    return (int64_t)v;
}

/* A long as the chunk stores it: varint when compressed, else 8 bytes big-endian. */
static inline int64_t jfr_long(struct jfr_cursor *c)
{
    return c->compressed ? jfr_varint(c) : jfr_be(c, 8);
}

/* An int/short/char: varint when compressed, else n_bytes big-endian. */
static inline int64_t jfr_int(struct jfr_cursor *c, unsigned n_bytes)
{
    return c->compressed ? jfr_varint(c) : jfr_be(c, n_bytes);
}
/* Reads a string header and skips its payload; the slice borrows the chunk. */
void jfr_str_read(struct jfr_cursor *c, struct jfr_str *out);
/* Appends s as UTF-8 (Latin-1 and UTF-16 converted, invalid UTF-8 replaced by U+FFFD) to
 * buf[*len..cap), truncating at cap-1; keeps buf NUL-terminated. POOL/NULL/EMPTY append
 * nothing. */
void jfr_str_append(const struct jfr_str *s, char *buf, size_t *len, size_t cap);
/* ---- maps ---- */

/* Inserts key → val unless key is present (the first definition wins); *inserted tells which.
 * Errors: SKP_ENOMEM. */
static inline skp_err jfr_map_put_new(struct skpx_u64map *m, uint64_t key, uint64_t val,
                                      bool *inserted)
{
    uint64_t old = 0;
    *inserted = false;
    if (skpx_u64map_get(m, key, &old))
        return SKP_OK;
    skp_err err = skpx_u64map_put(m, key, val);
    *inserted = err == SKP_OK;
    return err;
}

/* ---- metadata model (jfr_metadata.c) ---- */

enum jfr_prim {
    JFR_PRIM_STRUCT = 0,
    JFR_PRIM_BOOLEAN,
    JFR_PRIM_BYTE,
    JFR_PRIM_CHAR,
    JFR_PRIM_SHORT,
    JFR_PRIM_INT,
    JFR_PRIM_LONG,
    JFR_PRIM_FLOAT,
    JFR_PRIM_DOUBLE,
    JFR_PRIM_STRING,
};

/* Field names the parser acts on; every other field is skipped by type. */
enum jfr_role {
    JFR_R_NONE = 0,
    JFR_R_STACK_TRACE,
    JFR_R_SAMPLED_THREAD,
    JFR_R_EVENT_THREAD,
    JFR_R_DURATION,
    JFR_R_WEIGHT,
    JFR_R_ALLOCATION_SIZE,
    JFR_R_TLAB_SIZE,
    JFR_R_OBJECT_CLASS,
    JFR_R_SAMPLES,
    JFR_R_METHOD,
    JFR_R_LINE_NUMBER,
    JFR_R_FRAMES,
    JFR_R_TYPE,
    JFR_R_NAME,
    JFR_R_STRING,
    JFR_R_JAVA_NAME,
    JFR_R_OS_NAME,
    JFR_R_START_TIME,
    JFR_R_COUNT
};

struct jfr_field {
    const char *name; /* in the metadata arena */
    uint64_t type_id;
    uint32_t type_idx; /* index in jfr_meta.types, resolved after parsing */
    bool is_pool;      /* value is a constant-pool key */
    bool is_array;     /* dimension 1: count, then elements */
    uint8_t role;      /* enum jfr_role */
};

struct jfr_type {
    uint64_t id;
    const char *name;
    uint32_t first_field;
    uint32_t n_fields;
    uint8_t prim; /* enum jfr_prim */
};

struct jfr_meta {
    char *arena; /* NUL-terminated names, owned */
    size_t arena_len, arena_cap;
    struct jfr_type *types;
    uint32_t n_types;
    size_t cap_types;
    struct jfr_field *fields;
    uint32_t n_fields;
    size_t cap_fields;
    struct skpx_u64map by_id; /* type id → index */
};

/* Parses the metadata event at c->p (size, type id 0, ...) into m (previous content dropped).
 * Errors: SKP_EINVAL (malformed; err filled), SKP_ENOMEM. */
skp_err jfr_meta_parse(struct jfr_meta *m, struct jfr_cursor *c, struct jfr_error *err);
void jfr_meta_cleanup(struct jfr_meta *m);
/* Index of the type with this id, UINT32_MAX when undeclared. */
uint32_t jfr_meta_find_id(const struct jfr_meta *m, uint64_t id);
/* Index of the type with this name, UINT32_MAX when absent. */
uint32_t jfr_meta_find_name(const struct jfr_meta *m, const char *name);

/* One decoded field value: integers and pool keys in i, strings in s, arrays as (pos, n). */
struct jfr_val {
    bool has;
    bool is_pool;      /* i (or each array element) is a key into pool type_idx */
    uint32_t type_idx; /* the field's type */
    int64_t i;
    struct jfr_str s;
    const uint8_t *array_pos;
    uint32_t array_n;
};

/* Reads one value of `field` at c->p. With out non-NULL the value is stored there (pool key or
 * integer in i, string in s, array position/count; nested structs are skipped).
 * Sets c->bad on malformed input; depth bounds nested structs. */
void jfr_value_read(const struct jfr_meta *m, const struct jfr_field *f, struct jfr_cursor *c,
                    unsigned depth, struct jfr_val *out);
/* Reads every field of struct type `type_idx`, storing the ones with a role in vals[role]
 * (vals has JFR_R_COUNT entries, cleared first). */
void jfr_struct_read(const struct jfr_meta *m, uint32_t type_idx, struct jfr_cursor *c,
                     unsigned depth, struct jfr_val *vals);

/* ---- constant pools (jfr_constpool.c) ---- */

struct jfr_pools {
    struct skpx_u64map *by_type; /* [type index]: key → offset of the value in the chunk */
    uint32_t n_types;            /* entries of by_type (grown to the metadata's type count) */
    uint64_t n_entries;
};

/* Walks the chain of constant-pool events of the chunk starting at offset `first` (the
 * header's), newest first through each event's delta, and records where every constant's
 * value starts. Errors: SKP_EINVAL (malformed; err filled), SKP_ENOMEM. */
skp_err jfr_pools_index(struct jfr_pools *p, const struct jfr_meta *m, const uint8_t *chunk,
                        size_t chunk_len, bool compressed, uint64_t first, struct jfr_error *err);
/* Cursor at the value of (type, key); false when the chunk has no such constant. */
bool jfr_pools_find(const struct jfr_pools *p, uint32_t type_idx, int64_t key, const uint8_t *chunk,
                    size_t chunk_len, bool compressed, struct jfr_cursor *out);
void jfr_pools_clear(struct jfr_pools *p);
void jfr_pools_cleanup(struct jfr_pools *p);

/* Fills err (if non-NULL) with a printf-style message and the offset. Returns SKP_EINVAL. */
skp_err jfr_fail(struct jfr_error *err, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
