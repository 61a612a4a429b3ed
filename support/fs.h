/*
 * fs.h - file-system helpers shared by the tests (not product code).
 */
#ifndef LANESCHED_SUPPORT_FS_H
#define LANESCHED_SUPPORT_FS_H

/* rm -rf of a directory a test made; symlinks are removed, never followed. `path` borrowed.
 * Returns 0 when nothing is left at path, -1 otherwise (tests that must clean up assert it). */
int fs_remove_tree(const char *path);

#endif
