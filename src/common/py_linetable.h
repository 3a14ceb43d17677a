/* py_linetable.h - CPython's code-object location table (co_linetable), the format used by
 * CPython 3.11 through 3.14 (Objects/locations.md): entries that each cover 1-8 code units and
 * carry a line delta. Pure functions over a copy of the table; shared by the in-process Python
 * stack source and the out-of-process reader (src/attach). Thread-safe, never allocates. */
#ifndef SKP_COMMON_PY_LINETABLE_H
#define SKP_COMMON_PY_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* Line of the instruction at byte offset `addr` (code units x 2, from the start of the code)
 * in the location table `table` (len bytes, borrowed) of a code object whose first line is
 * `firstlineno`. Returns -1 when the table says "no line" for that instruction or the table
 * is corrupt or too short; `firstlineno` for a negative `addr` (a frame that has not started).
 * Hot path: bounded by len. */
int skpx_py_linetable_line(const uint8_t *table, size_t len, int firstlineno, int addr);

#endif
