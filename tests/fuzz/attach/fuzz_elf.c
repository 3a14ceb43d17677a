/* Fuzz target: the ELF symbol/section reader (src/attach/elfsym.c) on arbitrary bytes.
 * The input is copied to an 8-aligned buffer as mmap would give. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attach/elfsym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"_PyRuntime", "Py_Version", "PyCode_Type"};
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    struct attach_elf_info info;
    if (attach_elf_parse(copy, size, names, 3, &info) != SKP_OK)
        memset(&info, 0, sizeof(info));
    free(copy);
    return 0;
}
