/*
 * ctl.h - what the files of lanesched-ctl share (tools/ctl/): the options and the connection.
 *
 *   ctl.c    flags, commands: stats, figures, wait-drained, metrics, ping
 *   conn.c   the NATS connection from the shared connection flags (clients/c/tools/cli.h)
 *   watch.c  the watch command: every lanesched message decoded as one JSON line
 */
#ifndef LANESCHED_TOOLS_CTL_H
#define LANESCHED_TOOLS_CTL_H

#include "clients/c/lanes_client.h"

#include <nats/nats.h>
#include <stdbool.h>

typedef struct {
    lc_client_config_t conn; /* strings borrowed from argv / environ */
    long timeout_ms;
    bool replies; /* watch: follow replies on _INBOX.> too */
} ctl_opts_t;

/*
 * The connection flags' files checked before nats.c reads them, and --tls-cert and --tls-key
 * paired (common/keyfile.h): 0, or -1 with the reason on stderr (a command-line mistake: the
 * caller exits with USAGE_EXIT before connecting).
 */
int ctl_conn_check(const ctl_opts_t *o);

/*
 * Connects with the connection flags (servers, auth, TLS, timeout), once ctl_conn_check passed.
 * one_thread: every subscription's messages are delivered by one library thread, in the order
 * the server sent them (watch needs a request before its reply). *out is returned to the caller
 * (natsConnection_Destroy); on failure the reason is on stderr.
 */
int ctl_connect(const ctl_opts_t *o, bool one_thread, natsConnection **out /* out */);

/* lanesched-ctl watch [SUBJECT]: until SIGINT/SIGTERM. 0, or 1 when it could not subscribe. */
int ctl_watch(natsConnection *nc, const ctl_opts_t *o, const char *subject);

#endif
