/*
 * berth-sys: the engine's long-lived helper for the host calls Node cannot make itself, so that a
 * container's start and removal spawn no mount, umount, unshare or bash process. Started once by
 * the engine (src/common/host/sys-helper.ts), it reads requests on stdin and writes answers and
 * events on stdout until stdin ends. Single-threaded: every call it makes is short, except the
 * children it spawns, which it only forks and watches (poll loop, SIGCHLD through a self-pipe).
 *
 * Frames, both ways: u32 length (of what follows, little-endian), u32 id, u8 op, payload.
 * Strings in a payload are NUL-terminated, one after the other.
 *
 * Requests (each gets one RESULT with its id):
 *   1 MOUNT   source, fstype, target, data, cwd, flags (decimal)  mount(2) with cwd as the
 *             working directory (relative overlay layer paths), then back to /
 *   2 UMOUNT  target, flags (decimal)                              umount2(2)
 *   3 NETNS   path      a new network namespace, `lo` up, bound on the existing file at path
 *                        (unshare, bind mount of /proc/self/ns/net, setns back)
 *   4 SPAWN   fds, cwd, file, argc, argv..., envc, env...
 *             fork + exec in a new session; fds has one letter per child fd from 0: `n` /dev/null,
 *             `w` a pipe the child writes (the helper forwards it as DATA/EOF events), `r` a pipe
 *             the child reads (WRITE requests); every other descriptor is closed in the child.
 *             RESULT value: the pid. Then events with the request's id: DATA (u8 fd, bytes),
 *             EOF (u8 fd), EXIT (i32 wait status).
 *   5 WRITE   u32 handle, u8 fd, bytes      write to a spawned child's `r` pipe
 *   6 CLOSE   u32 handle, u8 fd (255: all)  close the helper's ends of a child's pipes
 *   7 EXEC    pidfile, cleanup, then SPAWN's payload (fds, cwd, file, argc, argv..., envc, env...)
 *             an exec session without a monitor process: the helper forks a shim (no exec of its
 *             own) that becomes a child subreaper and runs `file argv` (the runtime's `exec
 *             --detach --pid-file pidfile ...`) with descriptors 0-2; the shim's descriptor 3
 *             (fds[3], a `w` pipe) carries conmon's sync messages: `{"data": pid}` once the
 *             runtime exited 0 (the process runs, reparented to the shim), `{"data": -1}` when it
 *             failed (its log says why), then `{"data": exit code}` (128+signal) when the process
 *             ended. The shim keeps no end of the process's stdio, removes the pid file once read
             and the files in cleanup (newline-separated) once the runtime succeeded. Events as
             for SPAWN. The
             runtime runs from a sealed in-memory copy of `file` made once (see sealed_binary).
 * A WRITE that finds the pipe full is kept and finished when the child reads (its RESULT comes
 * then); a CLOSE of that pipe waits for it. Other requests go on meanwhile.
 * Answers and events:
 *   128 RESULT  i32 value (>= 0 ok, -errno), message
 *   129 DATA, 130 EOF, 131 EXIT (see SPAWN)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OP_MOUNT = 1, OP_UMOUNT = 2, OP_NETNS = 3, OP_SPAWN = 4, OP_WRITE = 5, OP_CLOSE = 6, OP_EXEC = 7 };
enum { EV_RESULT = 128, EV_DATA = 129, EV_EOF = 130, EV_EXIT = 131 };

#define MAX_CHILD_FDS 8
#define MAX_CHILDREN 1024
#define MAX_FRAME (1u << 20)

struct child {
  uint32_t id; /* the SPAWN request's id; 0 = free slot */
  pid_t pid;   /* 0 once reaped */
  int fds[MAX_CHILD_FDS]; /* helper's end of each pipe, -1 when none */
  char kind[MAX_CHILD_FDS];
};

static struct child children[MAX_CHILDREN];
static int sigpipe_fds[2];

static void die(const char *what) {
  fprintf(stderr, "berth-sys: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, -1);
        continue;
      }
      die("write to the engine");
    }
    p += n;
    len -= (size_t)n;
  }
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* One frame to the engine: header, then up to two payload parts. */
static void send_frame(uint32_t id, uint8_t op, const void *a, size_t alen, const void *b, size_t blen) {
  unsigned char head[9];
  put_u32(head, (uint32_t)(5 + alen + blen));
  put_u32(head + 4, id);
  head[8] = op;
  write_all(1, head, sizeof head);
  if (alen) write_all(1, a, alen);
  if (blen) write_all(1, b, blen);
}

static void send_result(uint32_t id, int32_t value, const char *msg) {
  unsigned char v[4];
  put_u32(v, (uint32_t)value);
  send_frame(id, EV_RESULT, v, 4, msg, msg ? strlen(msg) : 0);
}

static void send_errno(uint32_t id, int err, const char *what) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  send_result(id, -err, msg);
}

/* The NUL-terminated strings of a payload; NULL when fewer than n. */
static int split(char *p, size_t len, char **out, int n) {
  int i = 0;
  size_t off = 0;
  while (i < n && off < len) {
    char *end = memchr(p + off, '\0', len - off);
    if (!end) return -1;
    out[i++] = p + off;
    off = (size_t)(end - p) + 1;
  }
  return i == n ? (int)off : -1;
}

static void do_mount(uint32_t id, char *p, size_t len) {
  char *s[6];
  if (split(p, len, s, 6) < 0) return send_result(id, -EINVAL, "bad mount request");
  if (s[4][0] && chdir(s[4]) < 0) return send_errno(id, errno, s[4]);
  unsigned long flags = strtoul(s[5], NULL, 10);
  int r = mount(s[0], s[2], s[1], flags, s[3][0] ? s[3] : NULL);
  int err = errno;
  if (chdir("/") < 0) die("chdir /");
  if (r < 0) return send_errno(id, err, s[2]);
  send_result(id, 0, NULL);
}

static void do_umount(uint32_t id, char *p, size_t len) {
  char *s[2];
  if (split(p, len, s, 2) < 0) return send_result(id, -EINVAL, "bad umount request");
  if (umount2(s[0], (int)strtol(s[1], NULL, 10)) < 0) return send_errno(id, errno, s[0]);
  send_result(id, 0, NULL);
}

static int loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  int r = ioctl(s, SIOCGIFFLAGS, &ifr);
  if (r == 0) {
    ifr.ifr_flags |= IFF_UP;
    r = ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  int err = errno;
  close(s);
  errno = err;
  return r;
}

static void do_netns(uint32_t id, char *p, size_t len) {
  char *s[1];
  if (split(p, len, s, 1) < 0) return send_result(id, -EINVAL, "bad netns request");
  int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) return send_errno(id, errno, "open /proc/self/ns/net");
  if (unshare(CLONE_NEWNET) < 0) {
    int err = errno;
    close(home);
    return send_errno(id, err, "unshare(CLONE_NEWNET)");
  }
  const char *what = NULL;
  int err = 0;
  if (loopback_up() < 0) {
    what = "bringing lo up";
    err = errno;
  } else if (mount("/proc/self/ns/net", s[0], "none", MS_BIND, NULL) < 0) {
    what = s[0];
    err = errno;
  }
  /* never stay in the new namespace: every later request runs in the host's */
  if (setns(home, CLONE_NEWNET) < 0) die("setns back to the host's network namespace");
  close(home);
  if (what) return send_errno(id, err, what);
  send_result(id, 0, NULL);
}

static struct child *find_child(uint32_t id) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i].id == id) return &children[i];
  return NULL;
}

/* A WRITE the child's pipe could not take at once: the rest, written as the child reads. */
struct pending_write {
  unsigned char *buf; /* NULL: none */
  size_t len, off;
  uint32_t reply;  /* the WRITE request answered once it is all written */
  int close_after; /* a CLOSE of this pipe came meanwhile */
};

static struct pending_write pending[MAX_CHILDREN][MAX_CHILD_FDS];

static struct pending_write *pending_of(struct child *c, int fd) {
  return &pending[c - children][fd];
}

/* The pipe goes away with data still kept: the WRITE fails. */
static void drop_pending(struct child *c, int fd, int err) {
  struct pending_write *w = pending_of(c, fd);
  if (!w->buf) return;
  send_errno(w->reply, err, "write to child");
  free(w->buf);
  memset(w, 0, sizeof *w);
}

/* Write what is kept for (c, fd) as far as the pipe takes it; answer and close when done. */
static void flush_pending(struct child *c, int fd) {
  struct pending_write *w = pending_of(c, fd);
  while (w->buf && w->off < w->len) {
    ssize_t n = write(c->fds[fd], w->buf + w->off, w->len - w->off);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      int err = errno, close_after = w->close_after;
      drop_pending(c, fd, err);
      if (close_after) {
        close(c->fds[fd]);
        c->fds[fd] = -1;
      }
      return;
    }
    w->off += (size_t)n;
  }
  if (!w->buf) return;
  send_result(w->reply, 0, NULL);
  int close_after = w->close_after;
  free(w->buf);
  memset(w, 0, sizeof *w);
  if (close_after) {
    close(c->fds[fd]);
    c->fds[fd] = -1;
  }
}

/* Once the child is reaped and every pipe it (or a descendant) wrote is at its end, nobody reads
 * the pipes it was given to read any more: they are closed and the slot is free. */
static void free_if_done(struct child *c) {
  if (c->pid != 0) return;
  for (int i = 0; i < MAX_CHILD_FDS; i++)
    if (c->fds[i] >= 0 && c->kind[i] == 'w') return;
  for (int i = 0; i < MAX_CHILD_FDS; i++) {
    drop_pending(c, i, EPIPE);
    if (c->fds[i] >= 0) close(c->fds[i]);
    c->fds[i] = -1;
  }
  c->id = 0;
}

static void close_from(int lowfd) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = lowfd; fd < (max > 0 ? max : 65536); fd++) close((int)fd);
}

/*
 * Sealed in-memory copies of the runtimes EXEC runs. runc and crun copy their own binary into a
 * sealed memfd and execute that copy before they enter a container (CVE-2019-5736: the container
 * must not be able to overwrite the host's binary through /proc/self/exe), unless the binary they
 * run as already is a memfd with exactly these seals (runc's and crun's is_self_cloned). Made once
 * per binary and run with execveat(2), which saves that copy (and crun's read-only bind mount of
 * it) at every exec with the same protection: nothing can write to a sealed memfd. Made again
 * when the file on disk changed (an upgrade).
 */
#define SEALED_MAX 4
#define RUNTIME_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

static struct {
  char path[4096];
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  int fd; /* 0: unused slot */
} sealed[SEALED_MAX];

static int make_sealed(const char *path, const struct stat *st) {
  int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) return -1;
  int fd = memfd_create("berth-sealed-runtime", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = memfd_create("berth-sealed-runtime", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  off_t sent = 0;
  while (fd >= 0 && sent < st->st_size) {
    ssize_t n = sendfile(fd, in, NULL, (size_t)(st->st_size - sent));
    if (n <= 0) {
      close(fd);
      fd = -1;
      break;
    }
    sent += n;
  }
  close(in);
  if (fd >= 0 && (fcntl(fd, F_ADD_SEALS, RUNTIME_SEALS) < 0 || fcntl(fd, F_GET_SEALS) != RUNTIME_SEALS)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* The sealed copy of the binary at path, or -1 (then it is run from its path as it is). */
static int sealed_binary(const char *path) {
  struct stat st;
  if (strlen(path) >= sizeof sealed[0].path || stat(path, &st) < 0 || !S_ISREG(st.st_mode)) return -1;
  int free_slot = -1;
  for (int i = 0; i < SEALED_MAX; i++) {
    if (!sealed[i].fd) {
      if (free_slot < 0) free_slot = i;
      continue;
    }
    if (strcmp(sealed[i].path, path) != 0) continue;
    if (sealed[i].dev == st.st_dev && sealed[i].ino == st.st_ino && sealed[i].size == st.st_size &&
        sealed[i].mtime.tv_sec == st.st_mtim.tv_sec && sealed[i].mtime.tv_nsec == st.st_mtim.tv_nsec)
      return sealed[i].fd;
    close(sealed[i].fd); /* the file changed: a new copy */
    sealed[i].fd = 0;
    free_slot = i;
    break;
  }
  if (free_slot < 0) return -1;
  int fd = make_sealed(path, &st);
  if (fd < 0) return -1;
  if (fd == 0) { /* never slot value 0 */
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    fd = moved;
    if (fd < 0) return -1;
  }
  strcpy(sealed[free_slot].path, path);
  sealed[free_slot].dev = st.st_dev;
  sealed[free_slot].ino = st.st_ino;
  sealed[free_slot].size = st.st_size;
  sealed[free_slot].mtime = st.st_mtim;
  sealed[free_slot].fd = fd;
  return fd;
}

/* One of conmon's sync messages on the exec shim's status descriptor. */
static void shim_report(int fd, int value) {
  char line[64];
  int n = snprintf(line, sizeof line, "{\"data\": %d}\n", value);
  (void)!write(fd, line, (size_t)n);
}

/*
 * The exec shim (EXEC): in the forked child, instead of an exec of its own. Runs the runtime's
 * `exec --detach` with descriptors 0-2, keeps none of them, and reports on descriptor 3 the pid
 * from the runtime's pid file, then the process's exit (it is reparented to the shim, a child
 * subreaper, once the runtime exited). Never returns.
 */
static void exec_shim(const char *file, char **argv, char **envp, const char *pidfile, const char *cleanup, int errfd,
                      int binfd) {
  const int status_fd = 3;
  close(errfd); /* the helper's spawn is done: nothing of ours to exec */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
    shim_report(status_fd, -1);
    _exit(1);
  }
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) < 0) {
    shim_report(status_fd, -1);
    _exit(1);
  }
  pid_t rt = fork();
  if (rt < 0) {
    shim_report(status_fd, -1);
    _exit(1);
  }
  if (rt == 0) {
    close(status_fd);
    close(ep[0]);
    if (binfd >= 0) syscall(SYS_execveat, binfd, "", argv, envp, AT_EMPTY_PATH);
    execve(file, argv, envp);
    int err = errno;
    (void)!write(ep[1], &err, sizeof err);
    _exit(127);
  }
  close(ep[1]);
  /* the process's stdio is the runtime's and its own, never the shim's: EOF comes when they end */
  int devnull = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; fd++) dup2(devnull, fd);
  if (devnull > 2) close(devnull);
  int err = 0, status = 0;
  ssize_t n;
  do n = read(ep[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  close(ep[0]);
  while (waitpid(rt, &status, 0) < 0 && errno == EINTR) {
  }
  if (n == sizeof err || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    shim_report(status_fd, -1);
    _exit(0);
  }
  char buf[32] = {0};
  int fd = open(pidfile, O_RDONLY | O_CLOEXEC);
  ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0) close(fd);
  pid_t pid = got > 0 ? (pid_t)strtol(buf, NULL, 10) : 0;
  if (pid <= 0) {
    shim_report(status_fd, -1);
    _exit(0);
  }
  shim_report(status_fd, pid);
  /* the runtime is done with its files: the engine has nothing to remove after a start */
  unlink(pidfile);
  for (const char *f = cleanup; *f;) {
    const char *nl = strchr(f, '\n');
    size_t n = nl ? (size_t)(nl - f) : strlen(f);
    char path[4096];
    if (n < sizeof path) {
      memcpy(path, f, n);
      path[n] = '\0';
      unlink(path);
    }
    f += n + (nl ? 1 : 0);
  }
  for (;;) {
    /* orphans the process leaves are reparented here too: reaped, not reported */
    pid_t w = waitpid(-1, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      shim_report(status_fd, -1);
      _exit(1);
    }
  }
  shim_report(status_fd, WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
  _exit(0);
}

static void spawn_child(uint32_t id, char *p, size_t len, const char *shim_pidfile, const char *shim_cleanup);

static void do_spawn(uint32_t id, char *p, size_t len) { spawn_child(id, p, len, NULL, NULL); }

static void do_exec(uint32_t id, char *p, size_t len) {
  char *s[2];
  int off = split(p, len, s, 2);
  if (off < 0 || !s[0][0]) return send_result(id, -EINVAL, "bad exec request");
  spawn_child(id, p + off, len - (size_t)off, s[0], s[1]);
}

static void spawn_child(uint32_t id, char *p, size_t len, const char *shim_pidfile, const char *shim_cleanup) {
  char *head[4];
  int off = split(p, len, head, 4);
  if (off < 0) return send_result(id, -EINVAL, "bad spawn request");
  const char *fds = head[0], *cwd = head[1], *file = head[2];
  int argc = atoi(head[3]);
  size_t nfds = strlen(fds);
  if (argc < 1 || argc > 4096 || nfds > MAX_CHILD_FDS || (shim_pidfile && (nfds != 4 || fds[3] != 'w')))
    return send_result(id, -EINVAL, "bad spawn request");
  char **argv = calloc((size_t)argc + 1, sizeof *argv);
  char *envc_s[1];
  int off2, off3;
  if (!argv || (off2 = split(p + off, len - off, argv, argc)) < 0 ||
      (off3 = split(p + off + off2, len - off - off2, envc_s, 1)) < 0) {
    free(argv);
    return send_result(id, -EINVAL, "bad spawn request");
  }
  int envc = atoi(envc_s[0]);
  char **envp = calloc((size_t)(envc < 0 ? 0 : envc) + 1, sizeof *envp);
  if (envc < 0 || envc > 65536 || !envp ||
      split(p + off + off2 + off3, len - off - off2 - off3, envp, envc) < 0) {
    free(argv);
    free(envp);
    return send_result(id, -EINVAL, "bad spawn request");
  }
  struct child *c = find_child(0);
  if (!c) {
    free(argv);
    free(envp);
    return send_result(id, -EAGAIN, "too many children");
  }
  int mine[MAX_CHILD_FDS], theirs[MAX_CHILD_FDS];
  for (size_t i = 0; i < MAX_CHILD_FDS; i++) mine[i] = theirs[i] = -1;
  for (size_t i = 0; i < nfds; i++) {
    int pp[2];
    if (fds[i] == 'n') continue;
    if (pipe2(pp, O_CLOEXEC) < 0) {
      int err = errno;
      for (size_t j = 0; j < i; j++) {
        if (mine[j] >= 0) close(mine[j]);
        if (theirs[j] >= 0) close(theirs[j]);
      }
      free(argv);
      free(envp);
      return send_errno(id, err, "pipe");
    }
    if (fds[i] == 'w') {
      mine[i] = pp[0];
      theirs[i] = pp[1];
    } else {
      mine[i] = pp[1];
      theirs[i] = pp[0];
    }
    fcntl(mine[i], F_SETFL, O_NONBLOCK);
  }
  /* an exec failure is reported through a close-on-exec pipe */
  int binfd = shim_pidfile ? sealed_binary(file) : -1;
  int ep[2] = {-1, -1};
  pid_t pid = pipe2(ep, O_CLOEXEC) < 0 ? -1 : fork();
  if (pid < 0) {
    int err = errno;
    for (size_t i = 0; i < MAX_CHILD_FDS; i++) {
      if (mine[i] >= 0) close(mine[i]);
      if (theirs[i] >= 0) close(theirs[i]);
    }
    if (ep[0] >= 0) close(ep[0]);
    if (ep[1] >= 0) close(ep[1]);
    free(argv);
    free(envp);
    return send_errno(id, err, "fork");
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    setsid();
    /* move every descriptor the child keeps above the ones it gets, then place them */
    int base = 100;
    int src[MAX_CHILD_FDS];
    int devnull = open("/dev/null", O_RDWR);
    for (size_t i = 0; i < nfds; i++) {
      int from = fds[i] == 'n' ? devnull : theirs[i];
      src[i] = fcntl(from, F_DUPFD, base + (int)i);
    }
    int errfd = fcntl(ep[1], F_DUPFD_CLOEXEC, base + MAX_CHILD_FDS);
    int bin = binfd >= 0 ? fcntl(binfd, F_DUPFD_CLOEXEC, base + MAX_CHILD_FDS + 1) : -1;
    for (size_t i = 0; i < nfds; i++) dup2(src[i], (int)i);
    if (errfd != (int)nfds) {
      dup2(errfd, (int)nfds);
      fcntl((int)nfds, F_SETFD, FD_CLOEXEC);
    }
    if (bin >= 0) bin = dup3(bin, (int)nfds + 1, O_CLOEXEC); /* the shim's sealed runtime */
    close_from((int)nfds + (bin >= 0 ? 2 : 1));
    errfd = (int)nfds;
    if (cwd[0] && chdir(cwd) < 0) {
      int err = errno;
      (void)!write(errfd, &err, sizeof err);
      _exit(127);
    }
    if (shim_pidfile) exec_shim(file, argv, envp, shim_pidfile, shim_cleanup, errfd, bin);
    execve(file, argv, envp);
    int err = errno;
    (void)!write(errfd, &err, sizeof err);
    _exit(127);
  }
  close(ep[1]);
  for (size_t i = 0; i < nfds; i++)
    if (theirs[i] >= 0) close(theirs[i]);
  int err = 0;
  ssize_t n;
  do n = read(ep[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  close(ep[0]);
  free(argv);
  free(envp);
  c->id = id;
  c->pid = pid;
  for (size_t i = 0; i < MAX_CHILD_FDS; i++) {
    c->fds[i] = mine[i];
    c->kind[i] = i < nfds ? fds[i] : 'n';
  }
  if (n == sizeof err) {
    /* exec failed: the child exits at once; the EXIT event still comes, the pipes are dropped */
    for (size_t i = 0; i < MAX_CHILD_FDS; i++)
      if (c->fds[i] >= 0) {
        close(c->fds[i]);
        c->fds[i] = -1;
      }
    return send_errno(id, err, file);
  }
  send_result(id, pid, NULL);
}

static void keep_pending(struct child *c, int fd, uint32_t id, const unsigned char *data, size_t len) {
  struct pending_write *w = pending_of(c, fd);
  w->buf = malloc(len);
  if (!w->buf) return send_result(id, -ENOMEM, "write to child");
  memcpy(w->buf, data, len);
  w->len = len;
  w->off = 0;
  w->reply = id;
  w->close_after = 0;
}

static void do_write(uint32_t id, unsigned char *p, size_t len) {
  if (len < 5) return send_result(id, -EINVAL, "bad write request");
  struct child *c = find_child(get_u32(p));
  unsigned fd = p[4];
  if (!c || get_u32(p) == 0 || fd >= MAX_CHILD_FDS || c->kind[fd] != 'r' || c->fds[fd] < 0)
    return send_result(id, -EBADF, "no such pipe");
  if (pending_of(c, (int)fd)->buf) return send_result(id, -EBUSY, "a write to this pipe is under way");
  /* the pipe is non-blocking: what it cannot take now is kept, never waited for here */
  size_t off = 5;
  while (off < len) {
    ssize_t n = write(c->fds[fd], p + off, len - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return keep_pending(c, (int)fd, id, p + off, len - off);
      return send_errno(id, errno, "write to child");
    }
    off += (size_t)n;
  }
  send_result(id, 0, NULL);
}

static void do_close(uint32_t id, unsigned char *p, size_t len) {
  if (len < 5) return send_result(id, -EINVAL, "bad close request");
  uint32_t h = get_u32(p);
  struct child *c = h ? find_child(h) : NULL;
  if (c) {
    for (unsigned i = 0; i < MAX_CHILD_FDS; i++) {
      if ((p[4] == 255 || p[4] == i) && c->fds[i] >= 0) {
        if (p[4] == i && pending_of(c, (int)i)->buf) {
          pending_of(c, (int)i)->close_after = 1; /* once what is kept is written */
          continue;
        }
        drop_pending(c, (int)i, EPIPE);
        close(c->fds[i]);
        c->fds[i] = -1;
      }
    }
    free_if_done(c);
  }
  send_result(id, 0, NULL);
}

static void on_sigchld(int sig) {
  (void)sig;
  int e = errno;
  (void)!write(sigpipe_fds[1], "c", 1);
  errno = e;
}

static void reap(void) {
  char buf[64];
  while (read(sigpipe_fds[0], buf, sizeof buf) > 0) {
  }
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    for (int i = 0; i < MAX_CHILDREN; i++) {
      if (children[i].id != 0 && children[i].pid == pid) {
        unsigned char v[4];
        put_u32(v, (uint32_t)status);
        send_frame(children[i].id, EV_EXIT, v, 4, NULL, 0);
        children[i].pid = 0;
        free_if_done(&children[i]);
        break;
      }
    }
  }
}

static unsigned char *inbuf;
static size_t inlen;

/* Handle every complete frame in inbuf; keep the rest. */
static void handle_input(void) {
  size_t off = 0;
  while (inlen - off >= 9) {
    uint32_t flen = get_u32(inbuf + off);
    if (flen < 5 || flen > MAX_FRAME) {
      fprintf(stderr, "berth-sys: bad frame length %u\n", flen);
      exit(1);
    }
    if (inlen - off - 4 < flen) break;
    uint32_t id = get_u32(inbuf + off + 4);
    uint8_t op = inbuf[off + 8];
    unsigned char *payload = inbuf + off + 9;
    size_t plen = flen - 5;
    /* strings are read in place: the byte after the payload is the next frame's, keep a copy */
    unsigned char *copy = malloc(plen + 1);
    if (!copy) die("malloc");
    memcpy(copy, payload, plen);
    copy[plen] = '\0';
    switch (op) {
    case OP_MOUNT: do_mount(id, (char *)copy, plen); break;
    case OP_UMOUNT: do_umount(id, (char *)copy, plen); break;
    case OP_NETNS: do_netns(id, (char *)copy, plen); break;
    case OP_SPAWN: do_spawn(id, (char *)copy, plen); break;
    case OP_WRITE: do_write(id, copy, plen); break;
    case OP_CLOSE: do_close(id, copy, plen); break;
    case OP_EXEC: do_exec(id, (char *)copy, plen); break;
    default: send_result(id, -ENOSYS, "unknown request");
    }
    free(copy);
    off += 4 + flen;
  }
  memmove(inbuf, inbuf + off, inlen - off);
  inlen -= off;
}

int main(void) {
  /* what the engine leaked to us (sockets that are not close-on-exec) must not stay open here */
  close_from(3);
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK) < 0) die("pipe");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  if (chdir("/") < 0) die("chdir /");
  inbuf = malloc(MAX_FRAME + 9);
  if (!inbuf) die("malloc");
  static struct pollfd pfds[2 + MAX_CHILDREN * MAX_CHILD_FDS];
  static struct {
    struct child *c;
    int fd;
  } owners[MAX_CHILDREN * MAX_CHILD_FDS];
  static unsigned char data[65536];
  for (;;) {
    int n = 0;
    pfds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
    pfds[n++] = (struct pollfd){.fd = sigpipe_fds[0], .events = POLLIN};
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      if (!c->id) continue;
      for (int f = 0; f < MAX_CHILD_FDS; f++) {
        /* the pipes it writes, and those it reads while a WRITE to them is kept */
        int out = c->kind[f] == 'r' && pending_of(c, f)->buf;
        if (c->fds[f] < 0 || (c->kind[f] != 'w' && !out)) continue;
        owners[n - 2].c = c;
        owners[n - 2].fd = f;
        pfds[n++] = (struct pollfd){.fd = c->fds[f], .events = out ? POLLOUT : POLLIN};
      }
    }
    if (poll(pfds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    if (pfds[1].revents) reap();
    for (int i = 2; i < n; i++) {
      if (!pfds[i].revents) continue;
      struct child *c = owners[i - 2].c;
      int f = owners[i - 2].fd;
      if (c->fds[f] != pfds[i].fd) continue;
      if (c->kind[f] == 'r') {
        flush_pending(c, f);
        continue;
      }
      ssize_t r = read(c->fds[f], data, sizeof data);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      unsigned char fb = (unsigned char)f;
      if (r > 0) {
        send_frame(c->id, EV_DATA, &fb, 1, data, (size_t)r);
      } else {
        close(c->fds[f]);
        c->fds[f] = -1;
        send_frame(c->id, EV_EOF, &fb, 1, NULL, 0);
        free_if_done(c);
      }
    }
    if (pfds[0].revents) {
      ssize_t r = read(0, inbuf + inlen, MAX_FRAME + 9 - inlen);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) return 0; /* the engine is gone: so are we (our children live on) */
      inlen += (size_t)r;
      handle_input();
    }
  }
}
