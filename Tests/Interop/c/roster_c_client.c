/*
 * A gRPC client for Roster with no gRPC library: HTTP/2 from libnghttp2, messages from
 * libprotobuf-c (code made by protoc-c). It proves the wire format holds on its own.
 *
 *   roster_c_client HOST PORT [--token T] get GUID       prints guid, name, department
 *   roster_c_client HOST PORT [--token T] stream SIZE    prints pages and employees
 *   roster_c_client HOST PORT [--token T] count          prints CountEmployees
 *
 * Exits 0 on grpc-status 0; otherwise prints the status and message and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "roster/v1/directory.pb-c.h"
#include "roster/v1/types.pb-c.h"

/* One call: the framed request going out, the response body and trailers coming in. */
typedef struct {
  int fd;
  uint8_t *request;
  size_t request_length;
  size_t request_sent;
  uint8_t *body;
  size_t body_length;
  size_t body_capacity;
  int grpc_status;
  char grpc_message[512];
  int http_status;
  int closed;
} Call;

static void die(const char *what) {
  fprintf(stderr, "roster_c_client: %s\n", what);
  exit(2);
}

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
                             void *user_data) {
  (void)session;
  (void)flags;
  Call *call = user_data;
  ssize_t written = send(call->fd, data, length, 0);
  if (written < 0) return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
  return written;
}

static ssize_t read_request(nghttp2_session *session, int32_t stream_id, uint8_t *buffer, size_t length,
                                  uint32_t *flags, nghttp2_data_source *source, void *user_data) {
  (void)session;
  (void)stream_id;
  (void)source;
  Call *call = user_data;
  size_t left = call->request_length - call->request_sent;
  size_t count = left < length ? left : length;
  memcpy(buffer, call->request + call->request_sent, count);
  call->request_sent += count;
  if (call->request_sent == call->request_length) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)count;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t name_length,
                     const uint8_t *value, size_t value_length, uint8_t flags, void *user_data) {
  (void)session;
  (void)frame;
  (void)flags;
  Call *call = user_data;
  if (name_length == 7 && memcmp(name, ":status", 7) == 0) {
    call->http_status = atoi((const char *)value);
  } else if (name_length == 11 && memcmp(name, "grpc-status", 11) == 0) {
    char text[16] = {0};
    memcpy(text, value, value_length < 15 ? value_length : 15);
    call->grpc_status = atoi(text);
  } else if (name_length == 12 && memcmp(name, "grpc-message", 12) == 0) {
    size_t count = value_length < sizeof call->grpc_message - 1 ? value_length : sizeof call->grpc_message - 1;
    memcpy(call->grpc_message, value, count);
    call->grpc_message[count] = 0;
  }
  return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t length,
                   void *user_data) {
  (void)session;
  (void)flags;
  (void)stream_id;
  Call *call = user_data;
  if (call->body_length + length > call->body_capacity) {
    call->body_capacity = (call->body_length + length) * 2;
    call->body = realloc(call->body, call->body_capacity);
    if (!call->body) die("out of memory");
  }
  memcpy(call->body + call->body_length, data, length);
  call->body_length += length;
  return 0;
}

static int on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
  (void)session;
  (void)stream_id;
  (void)error_code;
  ((Call *)user_data)->closed = 1;
  return 0;
}

static int connect_to(const char *host, const char *port) {
  struct addrinfo hints = {0}, *found;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &found) != 0) die("cannot resolve the host");
  int fd = -1;
  for (struct addrinfo *each = found; each; each = each->ai_next) {
    fd = socket(each->ai_family, each->ai_socktype, each->ai_protocol);
    if (fd >= 0 && connect(fd, each->ai_addr, each->ai_addrlen) == 0) break;
    if (fd >= 0) close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) die("cannot connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* Sends one request message to `path` over plaintext HTTP/2 and reads the whole response. */
static void call_rpc(const char *host, const char *port, const char *token, const char *path,
                     const ProtobufCMessage *message, Call *call) {
  memset(call, 0, sizeof *call);
  call->grpc_status = -1;
  size_t size = protobuf_c_message_get_packed_size(message);
  call->request_length = 5 + size;
  call->request = malloc(call->request_length);
  call->request[0] = 0; /* not compressed */
  call->request[1] = (uint8_t)(size >> 24);
  call->request[2] = (uint8_t)(size >> 16);
  call->request[3] = (uint8_t)(size >> 8);
  call->request[4] = (uint8_t)size;
  protobuf_c_message_pack(message, call->request + 5);
  call->fd = connect_to(host, port);

  nghttp2_session_callbacks *callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_send_callback(callbacks, on_send);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
  nghttp2_session *session;
  nghttp2_session_client_new(&session, callbacks, call);
  nghttp2_session_callbacks_del(callbacks);
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, NULL, 0);

  char authority[300];
  snprintf(authority, sizeof authority, "%s:%s", host, port);
  char bearer[600];
  snprintf(bearer, sizeof bearer, "Bearer %s", token ? token : "");
#define HEADER(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}
  nghttp2_nv headers[] = {
      HEADER(":method", "POST"),
      HEADER(":scheme", "http"),
      HEADER(":path", path),
      HEADER(":authority", authority),
      HEADER("content-type", "application/grpc+proto"),
      HEADER("te", "trailers"),
      HEADER("user-agent", "roster-c-client/1.0 nghttp2"),
      HEADER("authorization", bearer),
  };
#undef HEADER
  size_t header_count = sizeof headers / sizeof headers[0] - (token ? 0 : 1);
  nghttp2_data_provider provider = {.read_callback = read_request};
  if (nghttp2_submit_request(session, NULL, headers, header_count, &provider, NULL) < 0) die("submit failed");

  uint8_t buffer[65536];
  while (!call->closed) {
    if (nghttp2_session_send(session) != 0) die("send failed");
    ssize_t got = recv(call->fd, buffer, sizeof buffer, 0);
    if (got <= 0) die("the connection closed before the call ended");
    if (nghttp2_session_mem_recv(session, buffer, (size_t)got) < 0) die("bad HTTP/2 from the server");
  }
  nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR);
  nghttp2_session_send(session);
  nghttp2_session_del(session);
  close(call->fd);
  free(call->request);
}

/* Calls `each` with every length-prefixed message of the response body; returns how many. */
static int for_each_message(const Call *call, void (*each)(const uint8_t *, size_t, void *), void *context) {
  size_t at = 0;
  int count = 0;
  while (at + 5 <= call->body_length) {
    if (call->body[at] != 0) die("compressed message: not asked for");
    size_t length = (size_t)call->body[at + 1] << 24 | (size_t)call->body[at + 2] << 16 |
                    (size_t)call->body[at + 3] << 8 | call->body[at + 4];
    if (at + 5 + length > call->body_length) die("truncated message");
    each(call->body + at + 5, length, context);
    at += 5 + length;
    count++;
  }
  if (at != call->body_length) die("trailing bytes after the last message");
  return count;
}

static int check_status(const Call *call) {
  if (call->http_status != 200 || call->grpc_status != 0) {
    printf("status %d: %s (HTTP %d)\n", call->grpc_status, call->grpc_message, call->http_status);
    return 1;
  }
  return 0;
}

static void print_employee(const uint8_t *bytes, size_t length, void *context) {
  (void)context;
  Roster__V1__Employee *employee = roster__v1__employee__unpack(NULL, length, bytes);
  if (!employee) die("cannot decode Employee");
  printf("%s\t%s\t%s\n", employee->guid, employee->name, employee->department);
  roster__v1__employee__free_unpacked(employee, NULL);
}

static void count_page(const uint8_t *bytes, size_t length, void *context) {
  Roster__V1__EmployeePage *page = roster__v1__employee_page__unpack(NULL, length, bytes);
  if (!page) die("cannot decode EmployeePage");
  long *employees = context;
  for (size_t i = 0; i < page->n_employees; i++) {
    if (strlen(page->employees[i]->guid) != 36) die("an employee without a guid");
  }
  *employees += (long)page->n_employees;
  roster__v1__employee_page__free_unpacked(page, NULL);
}

static void print_count(const uint8_t *bytes, size_t length, void *context) {
  (void)context;
  Roster__V1__CountEmployeesResponse *response = roster__v1__count_employees_response__unpack(NULL, length, bytes);
  if (!response) die("cannot decode CountEmployeesResponse");
  printf("%lld\n", (long long)response->count);
  roster__v1__count_employees_response__free_unpacked(response, NULL);
}

int main(int argc, char **argv) {
  if (argc < 4) die("usage: roster_c_client HOST PORT [--token T] get GUID | stream SIZE | count");
  const char *host = argv[1], *port = argv[2], *token = NULL;
  int at = 3;
  if (strcmp(argv[at], "--token") == 0 && argc > at + 2) {
    token = argv[at + 1];
    at += 2;
  }
  const char *command = argv[at];
  Call call;
  if (strcmp(command, "get") == 0 && argc > at + 1) {
    Roster__V1__GetEmployeeRequest request = ROSTER__V1__GET_EMPLOYEE_REQUEST__INIT;
    request.guid = argv[at + 1];
    call_rpc(host, port, token, "/roster.v1.Directory/GetEmployee", &request.base, &call);
    if (check_status(&call)) return 1;
    if (for_each_message(&call, print_employee, NULL) != 1) die("expected exactly one Employee");
  } else if (strcmp(command, "stream") == 0 && argc > at + 1) {
    Roster__V1__ListEmployeesRequest request = ROSTER__V1__LIST_EMPLOYEES_REQUEST__INIT;
    request.page_size = atoi(argv[at + 1]);
    call_rpc(host, port, token, "/roster.v1.Directory/StreamEmployees", &request.base, &call);
    if (check_status(&call)) return 1;
    long employees = 0;
    int pages = for_each_message(&call, count_page, &employees);
    printf("pages %d employees %ld\n", pages, employees);
  } else if (strcmp(command, "count") == 0) {
    Roster__V1__CountEmployeesRequest request = ROSTER__V1__COUNT_EMPLOYEES_REQUEST__INIT;
    call_rpc(host, port, token, "/roster.v1.Directory/CountEmployees", &request.base, &call);
    if (check_status(&call)) return 1;
    for_each_message(&call, print_count, NULL);
  } else {
    die("unknown command");
  }
  free(call.body);
  return 0;
}
