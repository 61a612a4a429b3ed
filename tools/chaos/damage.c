/*
 * damage.c - what the campaign does to the daemon's data directory while the daemon is down,
 * the damage a crash, a disk or an operator leaves:
 *
 *   tail          garbage appended to a segment file (a torn write past the durable boundary)
 *   index-delete  the LMDB index removed (rebuilt from the segments)
 *   index-empty   the index's data.mdb cut to 0 bytes
 *   index-stale   the index replaced by a copy taken at an earlier kill (rows behind the files)
 *   flip          one bit of a segment file flipped (may cost that entry: an acknowledged item
 *                 can be lost to it, so it is off by default and counted apart)
 *
 * Invariants:
 *   1. Only "flip" touches bytes an acknowledgement covers; every other kind must cost no
 *      acknowledged item (the default list is "tail,index-delete,index-empty").
 *   2. The choice among kinds and of file and offset comes from the campaign's seed.
 */
#include "tools/chaos/chaos.h"

#include "support/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const chaos_kinds[] = {"tail", "index-delete", "index-empty", "index-stale",
                                          "flip"};
#define CHAOS_KINDS (sizeof(chaos_kinds) / sizeof(chaos_kinds[0]))

int chaos_damage_parse(const char *list)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k != NULL;
         k = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < CHAOS_KINDS && strcmp(k, chaos_kinds[i]) != 0)
            i++;
        if (i == CHAOS_KINDS) {
            fprintf(stderr,
                    "chaos: unknown damage '%s' (tail, index-delete, index-empty, "
                    "index-stale, flip)\n",
                    k);
            return -1;
        }
    }
    return 0;
}

static void chaos_copy(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    char buf[1 << 16];
    for (ssize_t n; out >= 0 && (n = read(in, buf, sizeof(buf))) > 0;) {
        if (write(out, buf, (size_t)n) != n)
            break;
    }
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
}

void chaos_damage_snapshot(const char *data_dir, const char *work)
{
    char from[700], to[700];
    snprintf(from, sizeof(from), "%s/index/data.mdb", data_dir);
    snprintf(to, sizeof(to), "%s/stale-data.mdb", work);
    chaos_copy(from, to);
}

/* A segment file picked by rnd into path; 0, or -1 when there is none. */
static int chaos_segment_pick(const char *data_dir, uint64_t rnd, char *path, size_t len)
{
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/segments", data_dir);
    DIR *d = opendir(dir);
    size_t n = 0, want = (size_t)-1;
    for (int pass = 0; pass < 2 && d != NULL; pass++) {
        rewinddir(d);
        size_t i = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.')
                continue;
            if (pass == 1 && i == want) {
                snprintf(path, len, "%.700s/%.90s", dir, e->d_name);
                closedir(d);
                return 0;
            }
            i++;
        }
        n = i;
        if (n == 0)
            break;
        want = (size_t)(rnd % n);
    }
    if (d != NULL)
        closedir(d);
    return -1;
}

void chaos_damage_do(const char *data_dir, const char *work, const char *list, uint64_t rnd,
                     chaos_damage_t *counts)
{
    const char *kinds[CHAOS_KINDS];
    size_t n = 0;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k != NULL && n < CHAOS_KINDS;
         k = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < CHAOS_KINDS; i++)
            if (strcmp(k, chaos_kinds[i]) == 0)
                kinds[n++] = chaos_kinds[i];
    if (n == 0)
        return;
    const char *kind = kinds[rnd % n];
    rnd /= n;
    char path[800];
    if (strcmp(kind, "tail") == 0 && chaos_segment_pick(data_dir, rnd, path, sizeof(path)) == 0) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        uint8_t junk[256];
        for (size_t i = 0; i < sizeof(junk); i++)
            junk[i] = (uint8_t)(rnd >> (i % 56)) ^ (uint8_t)i;
        if (fd >= 0) {
            (void)!write(fd, junk, 1 + (rnd >> 8) % sizeof(junk));
            close(fd);
            counts->tails++;
        }
    } else if (strcmp(kind, "index-delete") == 0) {
        snprintf(path, sizeof(path), "%s/index", data_dir);
        fs_remove_tree(path);
        counts->index_deletes++;
    } else if (strcmp(kind, "index-empty") == 0) {
        snprintf(path, sizeof(path), "%s/index/data.mdb", data_dir);
        (void)!truncate(path, 0);
        counts->index_empties++;
    } else if (strcmp(kind, "index-stale") == 0) {
        char stale[700];
        snprintf(stale, sizeof(stale), "%s/stale-data.mdb", work);
        snprintf(path, sizeof(path), "%s/index/data.mdb", data_dir);
        if (access(stale, R_OK) == 0) {
            chaos_copy(stale, path);
            counts->index_stales++;
        }
    } else if (strcmp(kind, "flip") == 0 &&
               chaos_segment_pick(data_dir, rnd, path, sizeof(path)) == 0) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0) {
            off_t at = (off_t)((rnd >> 16) % (uint64_t)sb.st_size);
            uint8_t b;
            if (pread(fd, &b, 1, at) == 1) {
                b ^= (uint8_t)(1u << (rnd % 8));
                (void)!pwrite(fd, &b, 1, at);
                counts->flips++;
            }
        }
        if (fd >= 0)
            close(fd);
    }
}
