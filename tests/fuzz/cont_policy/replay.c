/* Replays every file of the given directories through LLVMFuzzerTestOneInput once: the corpus
 * regression run for builds without libFuzzer (ctest runs it, ASan in the asan build). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int n = 0;
    static uint8_t buf[1 << 20];
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            size_t len = fread(buf, 1, sizeof(buf), f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, len);
            n++;
        }
        if (d)
            closedir(d);
    }
    printf("%d inputs replayed\n", n);
    return n > 0 ? 0 : 1;
}
