/*
 * gvisor_compat: preloaded into every dynamically linked program of the runtime image
 * (/etc/ld.so.preload) so that coreutils behave inside gVisor as they do under runc. Each
 * wrapper only changes a result Linux never gives, so under runc none of them ever acts.
 *
 * statx: gVisor releases before 2023 (bookworm's own runsc, 0.0~20221219) reject statx's
 * AT_NO_AUTOMOUNT flag with EINVAL, and coreutils' ls, stat, cp -a ... pass it on every call
 * (`ls /` failed with "Invalid argument"). Retried without the flag, which only stops an
 * automount point from being mounted; a rollout container has none. setup.sh installs a newer
 * gVisor, which accepts the flag; the fallback stays for hosts that register an older one.
 *
 * lgetxattr / getxattr: `ls -l` asks for security.selinux of every entry, and gVisor
 * 0.0~20240729 answers EBADF for a symlink ("ls: /bin: Bad file descriptor") and EACCES for a
 * directory the caller cannot read ("ls: /root: Permission denied"). Linux checks no permission
 * for the security namespace and a path-based call never fails with EBADF: both become ENODATA
 * ("no such attribute"), which is what the file has. An EACCES from resolving the path itself
 * (the stat below fails too) is kept.
 *
 * Built on the host by docker/build.sh (gcc -O2 -shared -fPIC); the image has no compiler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

int statx(int dirfd, const char *restrict path, int flags, unsigned int mask,
          struct statx *restrict buf) {
    long rc = syscall(SYS_statx, dirfd, path, flags, mask, buf);
    if (rc != 0 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT) != 0) {
        rc = syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
    }
    return (int)rc;
}

static ssize_t as_linux(long rc, const char *path, const char *name, int follow) {
    if (rc >= 0) {
        return (ssize_t)rc;
    }
    if (errno == EBADF) {
        errno = ENODATA;
    } else if (errno == EACCES && strncmp(name, "security.", 9) == 0) {
        struct stat st;
        if ((follow ? stat(path, &st) : lstat(path, &st)) == 0) {
            errno = ENODATA;
        } else {
            errno = EACCES;
        }
    }
    return -1;
}

ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size) {
    return as_linux(syscall(SYS_lgetxattr, path, name, value, size), path, name, 0);
}

ssize_t getxattr(const char *path, const char *name, void *value, size_t size) {
    return as_linux(syscall(SYS_getxattr, path, name, value, size), path, name, 1);
}
