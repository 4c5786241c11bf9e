/* `syncrep keygen OUT_PREFIX`: a CURVE key pair in OUT_PREFIX.public and
 * OUT_PREFIX.secret (0600), each one 40-character Z85 line.  Files are
 * written to a temporary name, synced, and renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "cli/cli.h"

static int
write_key(const char *path, const char *key, const char *what, mode_t mode)
{
    char tmp[4200], dir[4200];
    char line[64];
    int  fd, n;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    snprintf(line, sizeof(line), "%s\n", key);
    n = (int)strlen(line);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)) < 0) {
        fprintf(stderr, "syncrep keygen: create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    if (write(fd, line, (size_t)n) != n || fsync(fd) != 0) {
        fprintf(stderr, "syncrep keygen: write %s: %s\n", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    if (access(path, F_OK) == 0) {
        fprintf(stderr, "syncrep keygen: %s exists; not overwriting a %s key\n", path, what);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "syncrep keygen: rename %s: %s\n", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    snprintf(dir, sizeof(dir), "%s", path);
    if ((fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync(fd);
        close(fd);
    }
    return 0;
}

int
sr__cli_keygen(int argc, char **argv)
{
    char pub[41], sec[41], path[4096];

    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: syncrep keygen OUT_PREFIX\n\n"
               "Writes a CURVE key pair: OUT_PREFIX.public and OUT_PREFIX.secret (mode 0600),\n"
               "each holding one 40-character Z85 key.  Give the coordinator its .secret\n"
               "(--curve-secret-key-file) and the clients' .public lines (--authorized-keys);\n"
               "give each client its own pair and the coordinator's .public.\n");
        return 0;
    }
    if (argc != 2 || argv[1][0] == '\0' || argv[1][0] == '-') {
        return sr_args_usage_error("keygen", "expected one OUT_PREFIX");
    }
    if (!zmq_has("curve") || zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "syncrep keygen: this libzmq has no CURVE support\n");
        return 1;
    }
    snprintf(path, sizeof(path), "%s.secret", argv[1]);
    if (write_key(path, sec, "secret", 0600) != 0) {
        memset(sec, 0, sizeof(sec));
        return 1;
    }
    memset(sec, 0, sizeof(sec));
    snprintf(path, sizeof(path), "%s.public", argv[1]);
    if (write_key(path, pub, "public", 0644) != 0) {
        return 1;
    }
    printf("%s.public %s\n%s.secret (0600)\n", argv[1], pub, argv[1]);
    return 0;
}
