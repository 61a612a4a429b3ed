/*
 * fs.c - removing and copying the temporary directories tests create.
 *
 * Invariant: never follows a symlink (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), so a test can only
 * delete what is inside the directory it named, and a copy holds only what is inside it.
 * Rejected: system("rm -rf") and system("cp -r"), which need a shell and quoting and hide
 * failures.
 */
#include "support/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

static int fs_copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = out < 0 ? -1 : 0;
    char buf[65536];
    while (rc == 0) {
        ssize_t r = read(in, buf, sizeof(buf));
        if (r <= 0) {
            rc = r < 0 ? -1 : 0;
            break;
        }
        if (write(out, buf, (size_t)r) != r)
            rc = -1;
    }
    int saved = errno;
    close(in);
    if (out >= 0)
        close(out);
    errno = saved;
    return rc;
}

int fs_copy_tree(const char *from, const char *to)
{
    if (mkdir(to, 0755) != 0 && errno != EEXIST)
        return -1;
    DIR *dir = opendir(from);
    if (dir == NULL)
        return -1;
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(dir)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char a[4096], b[4096];
        struct stat sb;
        if (snprintf(a, sizeof(a), "%s/%s", from, de->d_name) >= (int)sizeof(a) ||
            snprintf(b, sizeof(b), "%s/%s", to, de->d_name) >= (int)sizeof(b)) {
            errno = ENAMETOOLONG;
            rc = -1;
        } else if (lstat(a, &sb) != 0) {
            rc = -1;
        } else if (S_ISDIR(sb.st_mode)) {
            rc = fs_copy_tree(a, b);
        } else if (S_ISREG(sb.st_mode)) {
            rc = fs_copy_file(a, b);
        } else {
            errno = EINVAL;
            rc = -1;
        }
    }
    int saved = errno;
    closedir(dir);
    errno = saved;
    return rc;
}
