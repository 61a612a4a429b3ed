/*
 * cli.c - flag parsing, connection flags, clocks and the stop flag shared by lanesched-produce
 * and lanesched-consume.
 *
 * Owns: cli_stop, the only process-wide state of the tools.
 *
 * Invariants:
 *  1. A flag's value is borrowed from argv; nothing here allocates.
 *  2. Every parse failure prints one line naming the flag and returns failure; the caller exits
 *     with the usage status.
 *  3. The signal handler only stores to cli_stop (async-signal-safe).
 *
 * Rejected alternatives:
 *  - getopt_long: a GNU extension outside C11 + POSIX.1-2008, and it cannot take the repeatable
 *    --component in order any better than this loop does.
 *  - Each tool parsing the connection flags itself: two copies of the same ten flags would drift.
 */
#include "clients/c/tools/cli.h"

#include "common/clock.h"
#include "common/text.h"
#include "common/usage.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile sig_atomic_t cli_stop = 0;
const char *cli_program = "lanesched-tool";

static void cli_on_signal(int sig)
{
    (void)sig;
    cli_stop = 1;
}

void cli_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = cli_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int cli_flag_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);

    if (strncmp(arg, name, len) != 0)
        return 0;
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        usage_missing_value(cli_program, name);
        return -1;
    }
    *i += 1;
    *value = argv[*i];
    return 1;
}

/* $name when given (common/text.h), else def. */
static const char *cli_env(const char *name, const char *def)
{
    const char *v = getenv(name);
    return text_given(v) ? v : def;
}

void cli_conn_defaults(lc_client_config_t *config)
{
    lc_client_config_init(config);
    config->servers = cli_env("LANESCHED_SERVER", LC_DEFAULT_SERVER);
    config->prefix = cli_env("LANESCHED_PREFIX", LC_DEFAULT_PREFIX);
    config->user = cli_env("LANESCHED_USER", NULL);
    config->password = cli_env("LANESCHED_PASSWORD", NULL);
    config->token = cli_env("LANESCHED_TOKEN", NULL);
    config->creds_file = cli_env("LANESCHED_CREDS", NULL);
    config->tls_ca_file = cli_env("LANESCHED_TLS_CA", NULL);
    config->tls_cert_file = cli_env("LANESCHED_TLS_CERT", NULL);
    config->tls_key_file = cli_env("LANESCHED_TLS_KEY", NULL);
    config->inbox_prefix = cli_env("LANESCHED_INBOX_PREFIX", NULL);
}

void cli_unknown(const char *arg)
{
    if (arg[0] == '-')
        usage_unknown_flag(cli_program, arg);
    else
        usage_unexpected(cli_program, arg);
}

int cli_conn_flag(int argc, char **argv, int *i, lc_client_config_t *config)
{
    static const char *const names[] = {"--server",
                                        "--prefix",
                                        "--user",
                                        "--password",
                                        "--token",
                                        "--creds",
                                        "--tls-ca",
                                        "--tls-cert",
                                        "--tls-key",
                                        "--inbox-prefix",
                                        "--connect-timeout-ms"};
    const char *value = NULL;

    if (strcmp(argv[*i], "--tls") == 0) {
        config->tls = true;
        return 1;
    }
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        int rc = cli_flag_value(argc, argv, i, names[k], &value);
        if (rc <= 0) {
            if (rc < 0)
                return -1;
            continue;
        }
        switch (k) {
        case 0:
            if (value[0] == '\0') { /* the library would take it as unset: the default server */
                fprintf(stderr,
                        "%s: --server is empty: give NATS URLs, or leave the flag out for "
                        "LANESCHED_SERVER or " LC_DEFAULT_SERVER "\n",
                        cli_program);
                return -1;
            }
            config->servers = value;
            break;
        case 1:
            config->prefix = value;
            break;
        case 2:
            config->user = value;
            break;
        case 3:
            config->password = value;
            break;
        case 4:
            config->token = value;
            break;
        case 5:
            config->creds_file = value;
            break;
        case 6:
            config->tls_ca_file = value;
            break;
        case 7:
            config->tls_cert_file = value;
            break;
        case 8:
            config->tls_key_file = value;
            break;
        case 9:
            config->inbox_prefix = value;
            break;
        default: {
            uint64_t ms = 0;
            if (!cli_u64_parse(names[k], value, 1, INT64_MAX, &ms))
                return -1;
            config->connect_timeout_ms = (int64_t)ms;
            break;
        }
        }
        return 1;
    }
    return 0;
}

void cli_conn_help(FILE *f)
{
    fputs(
        "Connection:\n"
        "  --server URL[,URL...]   NATS servers (env LANESCHED_SERVER; default " LC_DEFAULT_SERVER
        ")\n"
        "  --prefix P              subject prefix (env LANESCHED_PREFIX; default " LC_DEFAULT_PREFIX
        ")\n"
        "  --user U --password P   user/password authentication (or nats://u:p@host in URL)\n"
        "                          (env LANESCHED_USER, LANESCHED_PASSWORD)\n"
        "  --token T               token authentication (env LANESCHED_TOKEN)\n"
        "  --creds FILE            NATS credentials file, JWT + NKey seed (env LANESCHED_CREDS)\n"
        "  --tls                   require TLS (implied by the three files below)\n"
        "  --tls-ca FILE           CA bundle (PEM) to verify the server (env LANESCHED_TLS_CA)\n"
        "  --tls-cert FILE         client certificate chain (PEM), with --tls-key FILE\n"
        "                          (env LANESCHED_TLS_CERT, LANESCHED_TLS_KEY)\n"
        "  --inbox-prefix P        every reply inbox starts with P, e.g. _INBOX.gpu-0 (env\n"
        "                          LANESCHED_INBOX_PREFIX; default _INBOX; docs/security.md)\n"
        "  --connect-timeout-ms N  connection timeout (default 2000)\n",
        f);
}

bool cli_u64_parse(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (text[0] < '0' || text[0] > '9')
        goto fail;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        goto fail;
    *out = (uint64_t)v;
    return true;
fail:
    fprintf(stderr, "%s: \"%s\" is not an integer in [%llu, %llu]\n", flag, text,
            (unsigned long long)min, (unsigned long long)max);
    return false;
}

bool cli_double_parse(const char *flag, const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(v) ||
        (v != 0 && (v < CLI_DOUBLE_MIN || v > CLI_DOUBLE_MAX))) {
        fprintf(stderr, "%s: \"%s\" is not 0 or a number from %g to %g\n", flag, text,
                CLI_DOUBLE_MIN, CLI_DOUBLE_MAX);
        return false;
    }
    *out = v;
    return true;
}

void cli_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !cli_stop)
        ;
}
