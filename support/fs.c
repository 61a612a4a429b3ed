/*
 * fs.c - removing the temporary directories tests create.
 *
 * Invariant: never follows a symlink (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), so a test can only
 * delete what is inside the directory it named. Rejected: system("rm -rf"), which needs a shell
 * and quoting and hides failures.
 */
#include "support/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fs_remove_at(int parent_fd, const char *name)
{
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        DIR *dir = fdopendir(fd);
        if (dir != NULL) {
            for (struct dirent *de; (de = readdir(dir)) != NULL;) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                    continue;
                struct stat sb;
                if (fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))
                    fs_remove_at(fd, de->d_name);
                else
                    unlinkat(fd, de->d_name, 0);
            }
            closedir(dir);
        } else {
            close(fd);
        }
    }
    unlinkat(parent_fd, name, AT_REMOVEDIR);
}

int fs_remove_tree(const char *path)
{
    struct stat sb;
    fs_remove_at(AT_FDCWD, path);
    return fstatat(AT_FDCWD, path, &sb, AT_SYMLINK_NOFOLLOW) == 0 ? -1 : 0;
}
