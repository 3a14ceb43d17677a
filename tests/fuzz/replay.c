/* replay.c - runs a fuzz target over its checked-in corpus (every file of the directories given,
 * or the files given) without libFuzzer: each file whole, then its prefixes of the first 4 KiB
 * in steps of 7 bytes (truncation at field boundaries). ctest runs it in the release and ASan
 * builds (cmake/SkpFuzz.cmake); it also replays one crash file: fuzz_replay_<name> crash-...*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput(buf, got);
    /* Every prefix of the first few KiB: truncation at each field boundary. */
    for (size_t k = 0; k < got && k < 4096; k += 7)
        LLVMFuzzerTestOneInput(buf, k);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0) {
                fprintf(stderr, "cannot read %s\n", argv[i]);
                return 1;
            }
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "cannot open %s\n", argv[i]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (run_file(path) != 0) {
                fprintf(stderr, "cannot read %s\n", path);
                closedir(d);
                return 1;
            }
            n++;
        }
        closedir(d);
    }
    printf("replayed %d corpus file(s)\n", n);
    return n > 0 ? 0 : 1;
}
