/* store_pg_bytea.h - bytea values of the PostgreSQL backend as text: parameters are sent as
 * "\x<hex>" text and results read in text format (bytea_output 'hex', the server's default), so
 * binary columns (endpoint histograms, uploaded profile files) go through the backend's
 * text-only statement helpers (store_pg_int.h). Pure; thread-safe. */
#ifndef SKP_SERVER_STORE_PG_BYTEA_H
#define SKP_SERVER_STORE_PG_BYTEA_H

#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* "\x" followed by 2 lowercase hex digits per byte, NUL-terminated; p may be NULL when n is 0.
 * Caller frees with skpx_free. NULL when out of memory. */
char *pg_bytea_hex(const uint8_t *p, size_t n);

/* Decodes a bytea text value in hex format ("\x0a0b...") into *out (caller frees with
 * skpx_free; never NULL on success, even for 0 bytes) and *n.
 * Errors: SKP_EPROTO (not hex format, odd length, bad digit), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pg_bytea_decode(const char *txt, uint8_t **out, size_t *n);

#endif
