/*
 * fuzz_main.c - replays inputs through a harness's LLVMFuzzerTestOneInput when it is not built
 * with libFuzzer (gcc, the sanitizer build): each argument is a file, or a directory whose
 * files are replayed in name order. CTest runs every harness over its seeds this way.
 */
#include "tests/fuzz/fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int fuzz_replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "fuzz: cannot open %s\n", path);
        return -1;
    }
    uint8_t *buf = malloc(1 << 20);
    size_t n = buf != NULL ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    if (buf == NULL)
        return -1;
    /* FUZZ_REPEAT=N replays each input N times (to time or profile a harness) */
    long repeat = getenv("FUZZ_REPEAT") != NULL ? atol(getenv("FUZZ_REPEAT")) : 1;
    for (long i = 0; i < (repeat > 0 ? repeat : 1); i++)
        LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int fuzz_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    size_t runs = 0;
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "fuzz: no such input %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (fuzz_replay_file(argv[i]) != 0)
                return 1;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char *names[4096];
        size_t n = 0;
        for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL && n < 4096;) {
            if (e->d_name[0] != '.')
                names[n++] = strdup(e->d_name);
        }
        if (d != NULL)
            closedir(d);
        qsort(names, n, sizeof(names[0]), fuzz_name_cmp);
        for (size_t k = 0; k < n; k++) {
            char path[4200];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]);
            if (fuzz_replay_file(path) != 0)
                return 1;
            runs++;
            free(names[k]);
        }
    }
    printf("fuzz: %zu inputs replayed, no crash\n", runs + 1);
    return 0;
}
