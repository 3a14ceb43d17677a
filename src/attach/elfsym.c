/* elfsym.c - minimal ELF64 reader. Every offset and size read from the file is checked against
 * the image before use: a truncated, corrupt or hostile file gives SKP_EINVAL or "not found",
 * never a read outside the buffer. Symbol tables are searched linearly (a few thousand entries,
 * once per attach). */
#include "attach/elfsym.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool in_image(size_t len, uint64_t off, uint64_t size)
{
    return off <= len && size <= len - off;
}

/* NUL-terminated name at strtab[idx] within [strtab, strtab+strsz), or NULL. */
static const char *str_at(const uint8_t *img, uint64_t stroff, uint64_t strsz, uint64_t idx)
{
    if (idx >= strsz)
        return NULL;
    const char *s = (const char *)img + stroff + idx;
    if (!memchr(s, 0, (size_t)(strsz - idx)))
        return NULL;
    return s;
}

static void search_symtab(const uint8_t *img, size_t len, const Elf64_Shdr *sh, uint16_t shnum,
                          const Elf64_Shdr *symtab, const char *const *names, size_t n,
                          struct attach_elf_info *out)
{
    if (symtab->sh_link >= shnum || symtab->sh_entsize != sizeof(Elf64_Sym))
        return;
    const Elf64_Shdr *strtab = &sh[symtab->sh_link];
    if (!in_image(len, symtab->sh_offset, symtab->sh_size) ||
        !in_image(len, strtab->sh_offset, strtab->sh_size))
        return;
    size_t count = (size_t)(symtab->sh_size / sizeof(Elf64_Sym));
    for (size_t i = 0; i < count; i++) {
        Elf64_Sym sym;
        memcpy(&sym, img + symtab->sh_offset + i * sizeof(Elf64_Sym), sizeof(sym));
        if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
            continue;
        const char *name = str_at(img, strtab->sh_offset, strtab->sh_size, sym.st_name);
        if (!name || !*name)
            continue;
        for (size_t k = 0; k < n; k++) {
            if (!out->values[k] && strcmp(name, names[k]) == 0) {
                out->values[k] = sym.st_value;
                out->sizes[k] = sym.st_size;
            }
        }
    }
}

skp_err attach_elf_parse(const uint8_t *img, size_t len, const char *const *names, size_t n,
                         struct attach_elf_info *out)
{
    memset(out, 0, sizeof(*out));
    if (n > ATTACH_ELF_NAMES_MAX)
        return SKP_EINVAL;
    Elf64_Ehdr eh;
    if (len < sizeof(eh))
        return SKP_EINVAL;
    memcpy(&eh, img, sizeof(eh));
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return SKP_EINVAL;
    out->e_type = eh.e_type;

    /* first PT_LOAD: link-time address of the image's first byte */
    if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
        !in_image(len, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr)))
        return SKP_EINVAL;
    bool have_load = false;
    for (uint16_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, img + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD) {
            out->load_vaddr = (ph.p_vaddr - ph.p_offset) & ~(uint64_t)0xfff;
            have_load = true;
            break;
        }
    }
    if (!have_load)
        return SKP_EINVAL;

    if (eh.e_shnum == 0)
        return SKP_OK; /* no sections (stripped of headers): nothing more to find */
    if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_image(len, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)) ||
        eh.e_shoff % 8 != 0 || eh.e_shstrndx >= eh.e_shnum)
        return SKP_EINVAL;
    /* e_shoff is 8-aligned and the image is page-aligned (mmap) or malloc'd: aligned access */
    Elf64_Shdr sh_copy[64];
    const Elf64_Shdr *sh;
    if (((uintptr_t)(img + eh.e_shoff) % _Alignof(Elf64_Shdr)) == 0) {
        sh = (const Elf64_Shdr *)(const void *)(img + eh.e_shoff);
    } else {
        if (eh.e_shnum > 64)
            return SKP_EINVAL;
        memcpy(sh_copy, img + eh.e_shoff, (size_t)eh.e_shnum * sizeof(Elf64_Shdr));
        sh = sh_copy;
    }
    const Elf64_Shdr *shstr = &sh[eh.e_shstrndx];
    bool names_ok = in_image(len, shstr->sh_offset, shstr->sh_size);
    for (uint16_t i = 0; i < eh.e_shnum && names_ok; i++) {
        const char *name = str_at(img, shstr->sh_offset, shstr->sh_size, sh[i].sh_name);
        if (!name)
            continue;
        struct attach_elf_section *dst = NULL;
        if (strcmp(name, ".PyRuntime") == 0)
            dst = &out->pyruntime;
        else if (strcmp(name, ".data") == 0)
            dst = &out->data;
        else if (strcmp(name, ".bss") == 0)
            dst = &out->bss;
        if (dst) {
            dst->addr = sh[i].sh_addr;
            dst->size = sh[i].sh_size;
        }
    }
    /* .dynsym first (always present in a shared object), then .symtab (unstripped builds) */
    for (int pass = 0; pass < 2; pass++) {
        uint32_t want = pass == 0 ? SHT_DYNSYM : SHT_SYMTAB;
        for (uint16_t i = 0; i < eh.e_shnum; i++)
            if (sh[i].sh_type == want)
                search_symtab(img, len, sh, eh.e_shnum, &sh[i], names, n, out);
    }
    return SKP_OK;
}

skp_err attach_elf_parse_file(const char *path, const char *const *names, size_t n,
                              struct attach_elf_info *out, char *why, size_t why_cap)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (why)
            snprintf(why, why_cap, "cannot open %s: %s", path, strerror(errno));
        return SKP_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        if (why)
            snprintf(why, why_cap, "%s is not a regular file", path);
        close(fd);
        return SKP_EIO;
    }
    if ((uint64_t)st.st_size > ATTACH_ELF_FILE_MAX) {
        if (why)
            snprintf(why, why_cap, "%s is larger than %zu bytes", path, ATTACH_ELF_FILE_MAX);
        close(fd);
        return SKP_ETOOBIG;
    }
    size_t len = (size_t)st.st_size;
    void *img = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED) {
        if (why)
            snprintf(why, why_cap, "cannot map %s: %s", path, strerror(errno));
        return SKP_EIO;
    }
    skp_err err = attach_elf_parse(img, len, names, n, out);
    if (err && why)
        snprintf(why, why_cap, "%s is not a 64-bit little-endian ELF file", path);
    munmap(img, len);
    return err;
}
