/*
 * conn.c - lanesched-ctl's NATS connection, built from the connection flags every tool shares
 * (clients/c/tools/cli.c parses them into an lc_client_config_t), so the auth flags and the
 * LANESCHED_* environment mean the same as for lanesched-produce and lanesched-consume.
 *
 * Rejected: lc_client_open. The C client library keeps its connection to itself, and watch
 * needs two subscriptions delivered in arrival order on one thread, which only the options of
 * the connection can ask for.
 */
#include "tools/ctl/ctl.h"

#include "common/keyfile.h"
#include "common/log.h"
#include "common/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a message calls a file's value: its variable when the environment gave it
 * (cli_conn_defaults keeps getenv's own pointer, a flag's value is argv's), else its flag. */
static const char *ctl_conn_label(const char *value, const char *flag, const char *var)
{
    return value != NULL && value == getenv(var) ? var : flag;
}

int ctl_conn_check(const ctl_opts_t *o)
{
    const lc_client_config_t *c = &o->conn;
    const char *const labels[] = {
        ctl_conn_label(c->creds_file, "--creds", "LANESCHED_CREDS"),
        ctl_conn_label(c->tls_ca_file, "--tls-ca", "LANESCHED_TLS_CA"),
        ctl_conn_label(c->tls_cert_file, "--tls-cert", "LANESCHED_TLS_CERT"),
        ctl_conn_label(c->tls_key_file, "--tls-key", "LANESCHED_TLS_KEY")};
    const char *const paths[] = {c->creds_file, c->tls_ca_file, c->tls_cert_file, c->tls_key_file};
    char bad[320];
    if (keyfile_conn_check(labels, paths, bad, sizeof(bad)) != KEYFILE_OK) {
        fprintf(stderr, "lanesched-ctl: %s\n", bad);
        return -1;
    }
    return 0;
}

int ctl_connect(const ctl_opts_t *o, bool one_thread, natsConnection **out)
{
    const lc_client_config_t *c = &o->conn;
    natsOptions *opts = NULL;
    char *urls = strdup(text_given(c->servers) ? c->servers : LC_DEFAULT_SERVER);
    const char *list[32];
    int n = 0, rc = 1;
    const char *what = "options";
    natsStatus s = urls != NULL ? natsOptions_Create(&opts) : NATS_NO_MEMORY;
    for (char *save = NULL, *u = urls != NULL ? strtok_r(urls, ", \t", &save) : NULL;
         u != NULL && n < 32; u = strtok_r(NULL, ", \t", &save))
        list[n++] = u;
    if (s == NATS_OK && (s = natsOptions_SetServers(opts, list, n)) != NATS_OK)
        what = "server list";
    if (s == NATS_OK && (s = natsOptions_SetName(opts, "lanesched-ctl")) != NATS_OK)
        what = "name";
    if (s == NATS_OK && (text_given(c->user) || text_given(c->password)) &&
        (s = natsOptions_SetUserInfo(opts, c->user, c->password)) != NATS_OK)
        what = "user/password";
    if (s == NATS_OK && text_given(c->token) &&
        (s = natsOptions_SetToken(opts, c->token)) != NATS_OK)
        what = "token";
    if (s == NATS_OK && text_given(c->creds_file) &&
        (s = natsOptions_SetUserCredentialsFromFiles(opts, c->creds_file, NULL)) != NATS_OK)
        what = "credentials file";
    if (s == NATS_OK && (c->tls || text_given(c->tls_ca_file) || text_given(c->tls_cert_file)) &&
        (s = natsOptions_SetSecure(opts, true)) != NATS_OK)
        what = "TLS";
    if (s == NATS_OK && text_given(c->tls_ca_file) &&
        (s = natsOptions_LoadCATrustedCertificates(opts, c->tls_ca_file)) != NATS_OK)
        what = "TLS CA file";
    if (s == NATS_OK && text_given(c->tls_cert_file) &&
        (s = natsOptions_LoadCertificatesChain(opts, c->tls_cert_file, c->tls_key_file)) != NATS_OK)
        what = "TLS certificate/key";
    if (s == NATS_OK && text_given(c->inbox_prefix) &&
        (s = natsOptions_SetCustomInboxPrefix(opts, c->inbox_prefix)) != NATS_OK)
        what = "inbox prefix";
    if (s == NATS_OK && c->connect_timeout_ms > 0 &&
        (s = natsOptions_SetTimeout(opts, c->connect_timeout_ms)) != NATS_OK)
        what = "connect timeout";
    if (s == NATS_OK && one_thread &&
        ((s = nats_SetMessageDeliveryPoolSize(1)) != NATS_OK ||
         (s = natsOptions_UseGlobalMessageDelivery(opts, true)) != NATS_OK))
        what = "message delivery";
    if (s == NATS_OK && (s = natsConnection_Connect(out, opts)) != NATS_OK)
        what = "connect";
    if (s == NATS_OK)
        rc = 0;
    if (s != NATS_OK) { /* the URLs without their passwords */
        char shown[512];
        log_redact(text_given(c->servers) ? c->servers : LC_DEFAULT_SERVER, shown, sizeof(shown));
        fprintf(stderr, "lanesched-ctl: cannot connect to NATS at %s (%s): %s\n", shown, what,
                natsStatus_GetText(s));
    }
    natsOptions_Destroy(opts);
    free(urls);
    return rc;
}
