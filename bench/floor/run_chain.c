/* The floor of a run in fresh namespaces, with no Python anywhere: what a reusable jail's per-run work costs when
 * written in C (bench/bench_namespace_floor.py compiles and runs this; see docs/performance.md).
 *
 * Per run, as services/lib/sandbox/zygote.py does it: fork the setup process; it unshares the given namespaces,
 * brings loopback up (with a network namespace), makes / private and mounts tmpfs on two folders, then forks the
 * run's first process, which mounts /proc (with a PID namespace), posix_spawns the program and waits for it.
 * Capabilities and seccomp are left out (a few system calls). Prints the median wall time per run and the mean
 * CPU time per run (getrusage of the children), in ms.
 *
 * FLAGS_HEX "direct" spawns the program from this process instead: the baseline.
 *
 * usage: run_chain RUNS FLAGS_HEX DIR_A DIR_B PROGRAM     (as root, in a private mount namespace: unshare -m)
 */
#define _GNU_SOURCE
#include <net/if.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void loopback_up(void) {
    int probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq request;
    memset(&request, 0, sizeof request);
    strcpy(request.ifr_name, "lo");
    ioctl(probe, SIOCGIFFLAGS, &request);
    request.ifr_flags |= IFF_UP;
    ioctl(probe, SIOCSIFFLAGS, &request);
    close(probe);
}

static int by_value(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static double cpu_ms(const struct rusage *u) {
    return (u->ru_utime.tv_sec + u->ru_stime.tv_sec) * 1e3 + (u->ru_utime.tv_usec + u->ru_stime.tv_usec) / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s RUNS FLAGS_HEX DIR_A DIR_B PROGRAM\n", argv[0]);
        return 2;
    }
    int runs = atoi(argv[1]);
    int direct = strcmp(argv[2], "direct") == 0;
    int flags = direct ? 0 : (int)strtol(argv[2], NULL, 16);
    char *program[] = {argv[5], NULL};
    long *wall = calloc((size_t)runs, sizeof *wall);
    struct rusage before, after;
    getrusage(RUSAGE_CHILDREN, &before);
    for (int i = 0; i < runs; i++) {
        long started = now_ns();
        if (direct) {
            pid_t child;
            if (posix_spawn(&child, program[0], NULL, NULL, program, environ) != 0) return 1;
            waitpid(child, NULL, 0);
            wall[i] = now_ns() - started;
            continue;
        }
        pid_t setup = fork();
        if (setup == 0) {
            if (flags && unshare(flags) != 0) _exit(10);
            if (flags & CLONE_NEWNET) loopback_up();
            if (flags & CLONE_NEWNS) {
                mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
                mount("tmpfs", argv[3], "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=1777");
                mount("tmpfs", argv[4], "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=1777");
            }
            pid_t first = fork();
            if (first == 0) {
                if (flags & CLONE_NEWPID) mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
                pid_t child;
                if (posix_spawn(&child, program[0], NULL, NULL, program, environ) != 0) _exit(11);
                waitpid(child, NULL, 0);
                _exit(0);
            }
            waitpid(first, NULL, 0);
            _exit(0);
        }
        int status;
        waitpid(setup, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "run %d failed (status %d)\n", i, status);
            return 1;
        }
        wall[i] = now_ns() - started;
    }
    getrusage(RUSAGE_CHILDREN, &after);
    qsort(wall, (size_t)runs, sizeof *wall, by_value);
    printf("%.3f %.3f\n", wall[runs / 2] / 1e6, (cpu_ms(&after) - cpu_ms(&before)) / runs);
    return 0;
}
