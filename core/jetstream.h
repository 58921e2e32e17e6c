/* jetstream.h — runnel on NATS JetStream: a durable sink publishing a
 * relation's changes (jetstream.c) and a source applying a stream's
 * messages as groups, its positions kept in the state (js_source.c).
 *
 * Threads: nats.c runs threads of its own (socket reader, publish acks).
 * They only hand messages over to the queues of the calling thread's
 * subscriptions and count failed publishes in the sink's own counter; they
 * never call rn_*. Every rn_* call happens on the thread that called these
 * functions. */
#ifndef RN_JETSTREAM_H
#define RN_JETSTREAM_H

#include <nats/nats.h>

#include "ndjson.h"

/* rn_js_sink_opts, rn_js_source_opts and rn_jetstream_sink are public (runnel.h). */

/* The state's id ("sid" in meta, created on first use): 32 hex digits
 * naming the state wherever its file goes (a snapshot keeps it), the first
 * part of each message id a JetStream sink publishes. Commits carried
 * groups first; not inside a group. */
int rn_state_id(rn_pipeline *p, char out[33]);

/* Applies the messages of o->subjects, from the position the state holds
 * for each plus one, as groups of up to o->batch messages. A message is
 * NDJSON lines of {"rel", "op", "row"} or a msgpack array of changes
 * [{rel =, op =, row =} …] (one upstream group, kept whole). Each group
 * also writes the stream sequence of the last message it applied per
 * subject ("jp:" in meta). After any failure the positions are read again
 * from the state. A position below the stream's first sequence (messages
 * discarded unread) is an error. st counts messages as lines. */
int rn_run_jetstream(rn_pipeline *p, const rn_js_source_opts *o, rn_run_stats *st);

/* "nats://a:1,nats://b:2" as the server list of o (natsOptions_SetURL
 * takes one URL); at most 16 servers. */
natsStatus rn_js_set_servers(natsOptions *o, const char *urls);

/* Connects to url (reconnecting for ever) and opens its JetStream
 * context. Destructors: jsCtx_Destroy, natsConnection_Destroy. */
int rn_js_connect(const char *url, natsConnection **nc, jsCtx **js, rn_err *e);

/* Tears nats.c down (its library state and threads, waiting up to 2 s
 * for them) if it was used; for the end of a process, when no connection
 * is left (a later connection opens it again). */
void rn_js_shutdown(void);

/* The position the state holds for subject of stream (0: none). */
int rn_js_position(rn_pipeline *p, const char *stream, const char *subject, uint64_t *seq);

#endif
