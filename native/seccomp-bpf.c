/*
 * berth-seccomp-bpf: compiles a seccomp filter to BPF with libseccomp, the calls crun makes
 * (libcrun_generate_seccomp), so the engine can compile each profile once and hand crun the
 * program (run.oci.seccomp_bpf_data). Built by scripts/build-native.sh.
 *
 * stdin, one directive per line, numbers in decimal (the engine maps the OCI names):
 *   default <action>
 *   arch <libseccomp arch name>
 *   rule <action> <syscall name> <argc> [<index> <op> <datum_a> <datum_b>]...
 * stdout: the BPF program (seccomp_export_bpf). Unknown syscall names are skipped, as crun does.
 * Exit status 0, or 1 with a message on stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *arg, int err) {
  fprintf(stderr, "berth-seccomp-bpf: %s %s%s%s\n", what, arg ? arg : "", err ? ": " : "",
          err ? strerror(err) : "");
  return 1;
}

int main(void) {
  char line[4096];
  scmp_filter_ctx ctx = NULL;
  unsigned long lineno = 0;

  while (fgets(line, sizeof line, stdin) != NULL) {
    char kind[16], name[128];
    int used = 0;
    lineno++;
    if (strchr(line, '\n') == NULL && !feof(stdin)) return fail("line too long", NULL, 0);
    if (sscanf(line, "%15s%n", kind, &used) != 1) continue;
    const char *rest = line + used;
    if (strcmp(kind, "default") == 0) {
      uint32_t action;
      if (ctx != NULL || sscanf(rest, "%" SCNu32, &action) != 1) return fail("bad default", NULL, 0);
      ctx = seccomp_init(action);
      if (ctx == NULL) return fail("seccomp_init", NULL, 0);
    } else if (ctx == NULL) {
      return fail("no default before", kind, 0);
    } else if (strcmp(kind, "arch") == 0) {
      if (sscanf(rest, "%127s", name) != 1) return fail("bad arch line", NULL, 0);
      uint32_t token = seccomp_arch_resolve_name(name);
      if (token == 0) return fail("unknown architecture", name, 0);
      int ret = seccomp_arch_add(ctx, token);
      if (ret < 0 && ret != -EEXIST) return fail("seccomp_arch_add", name, -ret);
    } else if (strcmp(kind, "rule") == 0) {
      uint32_t action;
      unsigned argc;
      int n = 0;
      if (sscanf(rest, "%" SCNu32 " %127s %u%n", &action, name, &argc, &n) != 3 || argc > 6) {
        return fail("bad rule line", NULL, 0);
      }
      rest += n;
      struct scmp_arg_cmp args[6];
      for (unsigned i = 0; i < argc; i++) {
        unsigned index, op;
        uint64_t a, b;
        if (sscanf(rest, "%u %u %" SCNu64 " %" SCNu64 "%n", &index, &op, &a, &b, &n) != 4) {
          return fail("bad rule arguments for", name, 0);
        }
        rest += n;
        args[i].arg = index;
        args[i].op = (enum scmp_compare)op;
        args[i].datum_a = a;
        args[i].datum_b = b;
      }
      int syscall = seccomp_syscall_resolve_name(name);
      if (syscall == __NR_SCMP_ERROR) continue;
      int ret = seccomp_rule_add_array(ctx, action, syscall, argc, args);
      if (ret < 0) return fail("seccomp_rule_add", name, -ret);
    } else {
      return fail("unknown directive", kind, 0);
    }
  }
  if (ctx == NULL) return fail("no default action", NULL, 0);
  int ret = seccomp_export_bpf(ctx, 1);
  if (ret < 0) return fail("seccomp_export_bpf", NULL, -ret);
  seccomp_release(ctx);
  return 0;
}
