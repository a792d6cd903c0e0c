/*
 * statx_fallback: preloaded into every dynamically linked program of the runtime image
 * (/etc/ld.so.preload), so coreutils work inside gVisor.
 *
 * Why: gVisor releases before 2023 (Debian bookworm ships runsc 0.0~20221219) reject statx's
 * AT_NO_AUTOMOUNT flag with EINVAL, and coreutils' ls, stat, cp -a ... pass it on every call:
 * under runsc `ls /` fails with "Invalid argument". Linux has accepted the flag since statx
 * existed (4.11), so a kernel never takes the retry below. The flag only stops an automount
 * point from being mounted; a rollout container has none, so dropping it changes nothing.
 * Docker's usual cure (a seccomp rule answering ENOSYS so glibc falls back to fstatat) is not
 * open to us: runsc loads no OCI seccomp profile in our setup.
 *
 * Built on the host by docker/build.sh (gcc -O2 -shared -fPIC); the image has no compiler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *restrict path, int flags, unsigned int mask,
          struct statx *restrict buf) {
    long rc = syscall(SYS_statx, dirfd, path, flags, mask, buf);
    if (rc != 0 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT) != 0) {
        rc = syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
    }
    return (int)rc;
}
