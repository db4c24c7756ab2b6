/*
 * An open-loop gRPC load generator for scripts/bench-overload, on libnghttp2 alone: calls
 * `ListEmployees` (a first page of PAGE_SIZE) at a fixed arrival rate, whatever the server's
 * answers do, each call with a deadline (`grpc-timeout`), and times every call from the
 * moment it was due to start, so that a generator running behind cannot hide a slow server.
 *
 *   openloop HOST PORT --rate N --seconds S [--warmup S] [--deadline-ms MS]
 *            [--connections N] [--page-size N]
 *
 * Prints one JSON object in the shape of `roster load --json`'s "total": calls ended in the
 * measured window (warm-up excluded), those that failed by status (`LATE` for an OK answer
 * after the deadline, `CLIENT_LIMIT` for a call no connection had a stream for, `NO_ANSWER`
 * for one still open a second past the end), goodput's latency percentiles and how far behind
 * its schedule the generator issued calls. One thread; it costs a few microseconds a call,
 * so on a core of its own it offers tens of thousands of calls a second, which `roster load`
 * (grpc-swift's client) cannot on this machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#define MAX_CONNECTIONS 64

typedef struct {
  int fd;
  nghttp2_session *session;
  int open;
} Connection;

typedef struct Call {
  double due;
  size_t sent;
  int grpc_status;
  int measured;
  struct Call *previous, *next; /* the calls still open */
} Call;

typedef struct {
  double *values;
  size_t count, capacity;
} Samples;

static const char *status_names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                     "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                     "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                     "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
enum { LATE = 17, CLIENT_LIMIT, NO_ANSWER, RESET, KINDS };
static const char *extra_names[] = {"LATE", "CLIENT_LIMIT", "NO_ANSWER", "RESET"};

static uint8_t request[16];
static size_t request_length;
static double deadline_s, window_start;
static long ended, failed, by_kind[KINDS];
static Samples good, bad, lag;
static Call *open_calls;

static void unlink_call(Call *call) {
  if (call->previous) call->previous->next = call->next;
  else open_calls = call->next;
  if (call->next) call->next->previous = call->previous;
  free(call);
}

static void die(const char *what) {
  fprintf(stderr, "openloop: %s\n", what);
  exit(2);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void add(Samples *samples, double value) {
  if (samples->count == samples->capacity) {
    samples->capacity = samples->capacity ? samples->capacity * 2 : 4096;
    samples->values = realloc(samples->values, samples->capacity * sizeof(double));
    if (!samples->values) die("out of memory");
  }
  samples->values[samples->count++] = value;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The nearest-rank percentile of sorted samples, in microseconds. */
static long percentile(const Samples *samples, double p) {
  if (samples->count == 0) return 0;
  size_t rank = (size_t)(p / 100.0 * (double)samples->count + 0.999999);
  if (rank < 1) rank = 1;
  return (long)(samples->values[rank - 1] * 1e6);
}

static void record(Call *call, int kind, double latency) {
  if (!call->measured) return;
  ended++;
  if (kind == 0) {
    add(&good, latency);
    return;
  }
  failed++;
  by_kind[kind]++;
  add(&bad, latency);
}

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags, void *user_data) {
  (void)session;
  (void)flags;
  ssize_t written = send(((Connection *)user_data)->fd, data, length, MSG_NOSIGNAL);
  if (written < 0) return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
  return written;
}

static ssize_t read_request(nghttp2_session *session, int32_t stream_id, uint8_t *buffer, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user_data) {
  (void)session;
  (void)stream_id;
  (void)user_data;
  Call *call = source->ptr;
  size_t left = request_length - call->sent, count = left < length ? left : length;
  memcpy(buffer, request + call->sent, count);
  call->sent += count;
  if (call->sent == request_length) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)count;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t name_length,
                     const uint8_t *value, size_t value_length, uint8_t flags, void *user_data) {
  (void)flags;
  (void)user_data;
  if (name_length != 11 || memcmp(name, "grpc-status", 11) != 0) return 0;
  Call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
  if (!call) return 0;
  char text[8] = {0};
  memcpy(text, value, value_length < 7 ? value_length : 7);
  call->grpc_status = atoi(text);
  return 0;
}

/* A call ends: timed from when it was due, by its status (the page's bytes are not read). */
static int on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
  (void)error_code;
  Connection *connection = user_data;
  Call *call = nghttp2_session_get_stream_user_data(session, stream_id);
  if (!call) return 0;
  connection->open--;
  double latency = now() - call->due;
  int kind;
  if (call->grpc_status < 0 || call->grpc_status > 16)
    kind = RESET;
  else if (call->grpc_status == 0)
    kind = latency <= deadline_s ? 0 : LATE;
  else
    kind = call->grpc_status;
  record(call, kind, latency);
  unlink_call(call);
  return 0;
}

static int connect_to(const char *host, const char *port) {
  struct addrinfo hints = {0}, *found;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &found) != 0) die("cannot resolve the host");
  int fd = -1;
  for (struct addrinfo *each = found; each; each = each->ai_next) {
    fd = socket(each->ai_family, each->ai_socktype | SOCK_NONBLOCK, each->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, each->ai_addr, each->ai_addrlen) == 0 || errno == EINPROGRESS) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) die("cannot connect");
  struct pollfd wait_for = {.fd = fd, .events = POLLOUT};
  int error = 0;
  socklen_t size = sizeof error;
  if (poll(&wait_for, 1, 5000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error)
    die("cannot connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int main(int argc, char **argv) {
  if (argc < 3) die("usage: openloop HOST PORT --rate N --seconds S [--warmup S] [--deadline-ms MS] "
                    "[--connections N] [--page-size N]");
  const char *host = argv[1], *port = argv[2];
  double rate = 0, seconds = 0, warmup = 1;
  long deadline_ms = 250, page_size = 50;
  int connections = 8;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--rate") == 0) rate = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--warmup") == 0) warmup = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--deadline-ms") == 0) deadline_ms = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--connections") == 0) connections = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--page-size") == 0) page_size = atol(argv[i + 1]);
    else die("unknown argument");
  }
  if (rate <= 0 || seconds <= 0 || connections < 1 || connections > MAX_CONNECTIONS || page_size < 1 ||
      page_size > 127 || deadline_ms < 1)
    die("--rate and --seconds must be positive, --connections 1-64, --page-size 1-127");
  deadline_s = (double)deadline_ms / 1000.0;

  /* A gRPC message: not compressed, 2 bytes long, field 1 (page_size) as a one-byte varint. */
  uint8_t message[] = {0, 0, 0, 0, 2, 0x08, (uint8_t)page_size};
  memcpy(request, message, sizeof message);
  request_length = sizeof message;

  nghttp2_session_callbacks *callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_send_callback(callbacks, on_send);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
  Connection pool[MAX_CONNECTIONS];
  struct pollfd polls[MAX_CONNECTIONS];
  for (int i = 0; i < connections; i++) {
    pool[i].fd = connect_to(host, port);
    pool[i].open = 0;
    if (nghttp2_session_client_new(&pool[i].session, callbacks, &pool[i]) != 0) die("nghttp2 session");
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
    nghttp2_submit_settings(pool[i].session, NGHTTP2_FLAG_NONE, settings, 1);
    polls[i].fd = pool[i].fd;
  }
  nghttp2_session_callbacks_del(callbacks);

  char authority[300], timeout[32];
  snprintf(authority, sizeof authority, "%s:%s", host, port);
  snprintf(timeout, sizeof timeout, "%ldm", deadline_ms);
#define HEADER(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}
  nghttp2_nv headers[] = {
      HEADER(":method", "POST"),         HEADER(":scheme", "http"),
      HEADER(":path", "/roster.v1.Directory/ListEmployees"),
      HEADER(":authority", authority),   HEADER("content-type", "application/grpc"),
      HEADER("te", "trailers"),          HEADER("grpc-timeout", timeout),
      HEADER("user-agent", "roster-openloop nghttp2"),
  };
#undef HEADER

  double start = now();
  window_start = start + warmup;
  double stop = window_start + seconds;
  long issued = 0, measured_issued = 0;
  int next_connection = 0;
  uint8_t buffer[1 << 16];
  for (;;) {
    double t = now();
    /* Every call due by now is issued now, timed from when it was due. */
    for (double due = start + (double)issued / rate; due <= t && due < stop; due = start + (double)issued / rate) {
      issued++;
      Call *call = calloc(1, sizeof *call);
      if (!call) die("out of memory");
      call->due = due;
      call->grpc_status = -1;
      call->measured = due >= window_start;
      if (call->measured) {
        measured_issued++;
        add(&lag, t - due);
      }
      int chosen = -1;
      for (int tried = 0; tried < connections && chosen < 0; tried++) {
        int i = (next_connection + tried) % connections;
        uint32_t limit = nghttp2_session_get_remote_settings(pool[i].session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        if ((uint32_t)pool[i].open < limit) chosen = i;
      }
      if (chosen < 0) {
        record(call, CLIENT_LIMIT, 0);
        free(call);
        continue;
      }
      next_connection = (chosen + 1) % connections;
      nghttp2_data_provider provider = {.source.ptr = call, .read_callback = read_request};
      if (nghttp2_submit_request(pool[chosen].session, NULL, headers, sizeof headers / sizeof headers[0], &provider,
                                 call) < 0)
        die("cannot submit a request");
      pool[chosen].open++;
      call->next = open_calls;
      if (open_calls) open_calls->previous = call;
      open_calls = call;
    }
    int open = 0;
    for (int i = 0; i < connections; i++) {
      if (nghttp2_session_send(pool[i].session) != 0) die("the connection failed");
      open += pool[i].open;
      polls[i].events = POLLIN | (nghttp2_session_want_write(pool[i].session) ? POLLOUT : 0);
    }
    if (t >= stop && (open == 0 || t >= stop + deadline_s + 1)) break;
    double until = t < stop ? start + (double)issued / rate - t : 0.01;
    if (until < 0) until = 0;
    struct timespec wait = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
    if (ppoll(polls, (nfds_t)connections, &wait, NULL) < 0 && errno != EINTR) die("poll failed");
    for (int i = 0; i < connections; i++) {
      if (!(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      for (;;) {
        ssize_t got = recv(pool[i].fd, buffer, sizeof buffer, 0);
        if (got < 0 && errno == EAGAIN) break;
        if (got <= 0) die("the server closed a connection");
        if (nghttp2_session_mem_recv(pool[i].session, buffer, (size_t)got) < 0) die("bad HTTP/2 from the server");
      }
    }
  }
  /* Calls still open a second past their deadline never answered. */
  while (open_calls) {
    record(open_calls, NO_ANSWER, now() - open_calls->due);
    open_calls = open_calls->next;
  }
  for (int i = 0; i < connections; i++) close(pool[i].fd);

  Samples *sorted[] = {&good, &bad, &lag};
  for (size_t i = 0; i < sizeof sorted / sizeof sorted[0]; i++)
    qsort(sorted[i]->values, sorted[i]->count, sizeof(double), compare);
  printf("{\"requests\": %ld, \"errors\": %ld, \"issued\": %ld, \"seconds\": %.3f, \"qps\": %.1f,\n", ended, failed,
         measured_issued, seconds, (double)measured_issued / seconds);
  printf(" \"succeededLatencyMicroseconds\": {\"p50\": %ld, \"p99\": %ld, \"max\": %ld},\n", percentile(&good, 50),
         percentile(&good, 99), percentile(&good, 100));
  printf(" \"failedLatencyMicroseconds\": {\"p50\": %ld, \"p99\": %ld},\n", percentile(&bad, 50),
         percentile(&bad, 99));
  printf(" \"issueLagMicroseconds\": {\"p50\": %ld, \"p99\": %ld},\n", percentile(&lag, 50), percentile(&lag, 99));
  printf(" \"errorsByStatus\": {");
  const char *separator = "";
  for (int kind = 1; kind < KINDS; kind++) {
    if (!by_kind[kind]) continue;
    printf("%s\"%s\": %ld", separator, kind < LATE ? status_names[kind] : extra_names[kind - LATE], by_kind[kind]);
    separator = ", ";
  }
  printf("}}\n");
  return 0;
}
