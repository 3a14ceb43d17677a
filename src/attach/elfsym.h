/* elfsym.h - what the out-of-process reader needs from an ELF image (the python executable or
 * libpython): addresses of named symbols (.dynsym, then .symtab), named sections (.PyRuntime,
 * .data, .bss) and the first loadable segment (to turn link-time addresses into the target's
 * run-time ones). The parser is a pure, bounds-checked function over the file's bytes (fuzzed:
 * tests/fuzz/attach_elf). 64-bit little-endian ELF only. Single-threaded. */
#ifndef SKP_ATTACH_ELFSYM_H
#define SKP_ATTACH_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Largest ELF file mapped for symbol lookup (libpython is about 20-30 MB with symbols). */
#define ATTACH_ELF_FILE_MAX ((size_t)1 << 30)
/* Most symbols one lookup asks for. */
#define ATTACH_ELF_NAMES_MAX 16

struct attach_elf_section {
    uint64_t addr, size; /* link-time address; size 0 = absent */
};

struct attach_elf_info {
    uint16_t e_type;     /* ET_EXEC or ET_DYN */
    uint64_t load_vaddr; /* p_vaddr - p_offset of the first PT_LOAD (page base) */
    struct attach_elf_section pyruntime, data, bss;
    uint64_t values[ATTACH_ELF_NAMES_MAX]; /* link-time value of names[i], 0 = not found */
    uint64_t sizes[ATTACH_ELF_NAMES_MAX];
};

/* Parses the ELF image `img` (len bytes, borrowed) and looks up names[0..n) (n <=
 * ATTACH_ELF_NAMES_MAX). Errors: SKP_EINVAL (not a 64-bit little-endian ELF, or a header or
 * table that points outside the image). Pure function. */
SKP_MUST_CHECK skp_err attach_elf_parse(const uint8_t *img, size_t len, const char *const *names,
                                        size_t n, struct attach_elf_info *out);

/* Maps `path` read-only and runs attach_elf_parse on it. Errors: SKP_EIO (cannot open or map;
 * errno's text in why), SKP_ETOOBIG, plus attach_elf_parse's. */
SKP_MUST_CHECK skp_err attach_elf_parse_file(const char *path, const char *const *names, size_t n,
                                             struct attach_elf_info *out, char *why,
                                             size_t why_cap);

#endif
