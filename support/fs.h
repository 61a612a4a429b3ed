/*
 * fs.h - file-system helpers shared by the tests (not product code).
 */
#ifndef LANESCHED_SUPPORT_FS_H
#define LANESCHED_SUPPORT_FS_H

/* rm -rf of a directory a test made; symlinks are removed, never followed. `path` borrowed.
 * Returns 0 when nothing is left at path, -1 otherwise (tests that must clean up assert it). */
int fs_remove_tree(const char *path);

/* cp -r of directory `from` (regular files and directories; anything else is an error) to `to`,
 * which must not exist yet or be an empty directory. Both borrowed. Returns 0, or -1 with errno
 * set at the first failure (what was copied until then is left). */
int fs_copy_tree(const char *from, const char *to);

#endif
