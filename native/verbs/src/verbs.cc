// smcscope verbs addon: libibverbs through dlopen (node-addon-api).
//
// The library is opened on first use with dlopen("libibverbs.so.1") and every exported function
// is looked up with dlsym, so this addon loads on machines without libibverbs or without RDMA
// and reports why ("libibverbs not available: ..."). The data-path calls (post_send, post_recv,
// poll_cq, req_notify_cq) are inline in <infiniband/verbs.h> and go through the context's ops:
// they need no symbol. `nm -u verbs.node | grep ibv_` must stay empty.
//
// The JS side (endpoint/verbs/ibverbs) holds numeric handles. Each native object lives in a
// table until it is destroyed; a memory region keeps a reference to its Node buffer while it is
// registered. Completion channels and the device's async-event fd are polled by libuv
// (uv_poll_t on the Env's loop): no busy polling on the JS thread. Errors are JS exceptions
// whose message names the verbs call, with .code (errno name), .errno and .call.
#include <napi.h>
#include <uv.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// dlopen'd entry points
// ---------------------------------------------------------------------------------------------

struct Lib {
  void *h = nullptr;
  bool tried = false;
  std::string error;
  std::string path;
  ibv_device **(*get_device_list)(int *) = nullptr;
  void (*free_device_list)(ibv_device **) = nullptr;
  const char *(*get_device_name)(ibv_device *) = nullptr;
  __be64 (*get_device_guid)(ibv_device *) = nullptr;
  ibv_context *(*open_device)(ibv_device *) = nullptr;
  int (*close_device)(ibv_context *) = nullptr;
  int (*query_device)(ibv_context *, ibv_device_attr *) = nullptr;
  int (*query_port_compat)(ibv_context *, uint8_t, struct _compat_ibv_port_attr *) = nullptr;
  int (*query_gid)(ibv_context *, uint8_t, int, ibv_gid *) = nullptr;
  int (*query_gid_ex)(ibv_context *, uint32_t, uint32_t, ibv_gid_entry *, uint32_t, size_t) = nullptr; // optional
  ibv_pd *(*alloc_pd)(ibv_context *) = nullptr;
  int (*dealloc_pd)(ibv_pd *) = nullptr;
  ibv_mr *(*reg_mr)(ibv_pd *, void *, size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr *) = nullptr;
  ibv_comp_channel *(*create_comp_channel)(ibv_context *) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel *) = nullptr;
  ibv_cq *(*create_cq)(ibv_context *, int, void *, ibv_comp_channel *, int) = nullptr;
  int (*destroy_cq)(ibv_cq *) = nullptr;
  int (*get_cq_event)(ibv_comp_channel *, ibv_cq **, void **) = nullptr;
  void (*ack_cq_events)(ibv_cq *, unsigned int) = nullptr;
  ibv_qp *(*create_qp)(ibv_pd *, ibv_qp_init_attr *) = nullptr;
  int (*modify_qp)(ibv_qp *, ibv_qp_attr *, int) = nullptr;
  int (*query_qp)(ibv_qp *, ibv_qp_attr *, int, ibv_qp_init_attr *) = nullptr;
  int (*destroy_qp)(ibv_qp *) = nullptr;
  int (*get_async_event)(ibv_context *, ibv_async_event *) = nullptr;
  void (*ack_async_event)(ibv_async_event *) = nullptr;
};

Lib lib;

template <typename T>
bool sym(const char *name, T &out, bool required = true) {
  void *p = dlsym(lib.h, name);
  if (!p) {
    if (required) lib.error = std::string("libibverbs not available: symbol ") + name + " missing in " + lib.path;
    return !required;
  }
  out = reinterpret_cast<T>(p);
  return true;
}

bool loadLib() {
  if (lib.tried) return lib.h != nullptr && lib.error.empty();
  lib.tried = true;
  const char *env = getenv("SMCSCOPE_LIBIBVERBS");
  lib.path = env && *env ? env : "libibverbs.so.1";
  lib.h = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.h) {
    const char *e = dlerror();
    lib.error = std::string("libibverbs not available: cannot load ") + lib.path + " (" + (e ? e : "unknown") +
                "); install libibverbs1 (Debian: apt-get install libibverbs1 ibverbs-providers)";
    return false;
  }
  bool ok = sym("ibv_get_device_list", lib.get_device_list) && sym("ibv_free_device_list", lib.free_device_list) &&
            sym("ibv_get_device_name", lib.get_device_name) && sym("ibv_get_device_guid", lib.get_device_guid) &&
            sym("ibv_open_device", lib.open_device) && sym("ibv_close_device", lib.close_device) &&
            sym("ibv_query_device", lib.query_device) && sym("ibv_query_port", lib.query_port_compat) &&
            sym("ibv_query_gid", lib.query_gid) && sym("_ibv_query_gid_ex", lib.query_gid_ex, false) &&
            sym("ibv_alloc_pd", lib.alloc_pd) && sym("ibv_dealloc_pd", lib.dealloc_pd) &&
            sym("ibv_reg_mr", lib.reg_mr) && sym("ibv_dereg_mr", lib.dereg_mr) &&
            sym("ibv_create_comp_channel", lib.create_comp_channel) &&
            sym("ibv_destroy_comp_channel", lib.destroy_comp_channel) && sym("ibv_create_cq", lib.create_cq) &&
            sym("ibv_destroy_cq", lib.destroy_cq) && sym("ibv_get_cq_event", lib.get_cq_event) &&
            sym("ibv_ack_cq_events", lib.ack_cq_events) && sym("ibv_create_qp", lib.create_qp) &&
            sym("ibv_modify_qp", lib.modify_qp) && sym("ibv_query_qp", lib.query_qp) &&
            sym("ibv_destroy_qp", lib.destroy_qp) && sym("ibv_get_async_event", lib.get_async_event) &&
            sym("ibv_ack_async_event", lib.ack_async_event);
  if (!ok) {
    dlclose(lib.h);
    lib.h = nullptr;
  }
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

const char *errnoName(int e) {
  switch (e) {
    case EPERM: return "EPERM"; case ENOENT: return "ENOENT"; case EIO: return "EIO"; case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN"; case ENOMEM: return "ENOMEM"; case EACCES: return "EACCES"; case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY"; case EEXIST: return "EEXIST"; case ENODEV: return "ENODEV"; case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC"; case ENOSYS: return "ENOSYS"; case EOPNOTSUPP: return "EOPNOTSUPP";
    case ETIMEDOUT: return "ETIMEDOUT"; case ENXIO: return "ENXIO"; case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    default: return "EUNKNOWN";
  }
}

// The exception for a failed verbs call: "ibv_reg_mr failed: Cannot allocate memory (ENOMEM)".
[[noreturn]] void throwCall(Napi::Env env, const char *call, int err, const std::string &extra = "") {
  std::string msg = std::string(call) + " failed: " + strerror(err) + " (" + errnoName(err) + ")" + extra;
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, errnoName(err)));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("call", Napi::String::New(env, call));
  throw e;
}

[[noreturn]] void throwType(Napi::Env env, const char *call, const std::string &what) {
  Napi::TypeError e = Napi::TypeError::New(env, std::string(call) + ": " + what);
  e.Set("code", Napi::String::New(env, "ERR_INVALID_ARG_TYPE"));
  e.Set("call", Napi::String::New(env, call));
  throw e;
}

[[noreturn]] void throwUnavailable(Napi::Env env) {
  Napi::Error e = Napi::Error::New(env, lib.error);
  e.Set("code", Napi::String::New(env, "ENOLIB"));
  throw e;
}

void need(Napi::Env env) {
  if (!loadLib()) throwUnavailable(env);
}

// ---------------------------------------------------------------------------------------------
// Handle tables
// ---------------------------------------------------------------------------------------------

struct Ctx;
struct Cq;

struct Poller {
  uv_poll_t poll;
  void *owner;
};

struct Ctx {
  uint32_t id;
  ibv_context *ctx;
  Poller *poller = nullptr;
  Napi::FunctionReference onAsync;
  std::unique_ptr<Napi::AsyncContext> actx;
  Napi::Env env;
  explicit Ctx(Napi::Env e) : env(e) {}
};
struct Pd { uint32_t id; ibv_pd *pd; uint32_t ctx; };
struct Mr { uint32_t id; ibv_mr *mr; uint32_t pd; Napi::Reference<Napi::Value> keep; };
struct Cq {
  uint32_t id;
  ibv_cq *cq;
  ibv_comp_channel *ch;
  uint32_t ctx;
  Poller *poller = nullptr;
  Napi::FunctionReference onWc;
  std::unique_ptr<Napi::AsyncContext> actx;
  unsigned unacked = 0;
  Napi::Env env;
  explicit Cq(Napi::Env e) : env(e) {}
};
struct Qp { uint32_t id; ibv_qp *qp; uint32_t pd; uint32_t scq, rcq; uint32_t maxInline; };

uint32_t nextId = 1;
std::map<uint32_t, std::unique_ptr<Ctx>> ctxs;
std::map<uint32_t, std::unique_ptr<Pd>> pds;
std::map<uint32_t, std::unique_ptr<Mr>> mrs;
std::map<uint32_t, std::unique_ptr<Cq>> cqs;
std::map<uint32_t, std::unique_ptr<Qp>> qps;

template <typename T>
T *lookup(Napi::Env env, std::map<uint32_t, std::unique_ptr<T>> &m, const Napi::Value &v, const char *call, const char *what) {
  if (!v.IsNumber()) throwType(env, call, std::string(what) + " handle must be a number");
  uint32_t id = v.As<Napi::Number>().Uint32Value();
  auto it = m.find(id);
  if (it == m.end()) {
    Napi::Error e = Napi::Error::New(env, std::string(call) + ": no such " + what + " (destroyed or never created)");
    e.Set("code", Napi::String::New(env, "EBADF"));
    e.Set("call", Napi::String::New(env, call));
    throw e;
  }
  return it->second.get();
}

uint32_t u32(Napi::Env env, const Napi::Object &o, const char *key, const char *call, uint32_t def, bool required = false) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) {
    if (required) throwType(env, call, std::string(key) + " is required");
    return def;
  }
  if (!v.IsNumber()) throwType(env, call, std::string(key) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 4294967295.0) || d != static_cast<double>(static_cast<uint64_t>(d)))
    throwType(env, call, std::string(key) + " must be an unsigned 32-bit integer");
  return static_cast<uint32_t>(d);
}

uint64_t u64(Napi::Env env, const Napi::Value &v, const char *call, const char *what) {
  if (v.IsBigInt()) {
    bool lossless = true;
    uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throwType(env, call, std::string(what) + " does not fit in 64 bits");
    return x;
  }
  if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (!(d >= 0 && d <= 9007199254740991.0) || d != static_cast<double>(static_cast<uint64_t>(d)))
      throwType(env, call, std::string(what) + " must be a non-negative safe integer");
    return static_cast<uint64_t>(d);
  }
  throwType(env, call, std::string(what) + " must be a bigint or a number");
}

Napi::Object asObject(Napi::Env env, const Napi::Value &v, const char *call, const char *what) {
  if (!v.IsObject()) throwType(env, call, std::string(what) + " must be an object");
  return v.As<Napi::Object>();
}

// ---------------------------------------------------------------------------------------------
// Library / devices
// ---------------------------------------------------------------------------------------------

// status(): { available, error?, library }
Napi::Value Status(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  bool ok = loadLib();
  o.Set("loaded", Napi::Boolean::New(env, ok));
  o.Set("library", Napi::String::New(env, lib.path));
  if (!ok) o.Set("error", Napi::String::New(env, lib.error));
  return o;
}

// deviceList(): [{ name, guid }]; throws "libibverbs not available: ..." in plain words.
Napi::Value DeviceList(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  int n = 0;
  errno = 0;
  ibv_device **list = lib.get_device_list(&n);
  if (!list) {
    int e = errno;
    std::string why;
    if (e == ENOSYS)
      why = "this kernel has no RDMA support (no InfiniBand/RDMA subsystem), so there are no RDMA devices "
            "(ibv_get_device_list: function not implemented)";
    else if (e == EPERM || e == EACCES)
      why = std::string("no permission to list RDMA devices (ibv_get_device_list: ") + strerror(e) + ")";
    else
      why = std::string("ibv_get_device_list failed: ") + strerror(e) + " (" + errnoName(e) + ")";
    Napi::Error err = Napi::Error::New(env, "libibverbs not available: " + why);
    err.Set("code", Napi::String::New(env, e == ENOSYS ? "ENOSYS" : errnoName(e)));
    err.Set("errno", Napi::Number::New(env, e));
    err.Set("call", Napi::String::New(env, "ibv_get_device_list"));
    throw err;
  }
  Napi::Array arr = Napi::Array::New(env, n);
  for (int i = 0; i < n; i++) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("name", Napi::String::New(env, lib.get_device_name(list[i])));
    d.Set("guid", Napi::BigInt::New(env, static_cast<uint64_t>(be64toh(lib.get_device_guid(list[i])))));
    arr.Set(i, d);
  }
  lib.free_device_list(list);
  return arr;
}

void setNonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void closePoller(Poller *p) {
  if (!p) return;
  uv_poll_stop(&p->poll);
  uv_close(reinterpret_cast<uv_handle_t *>(&p->poll), [](uv_handle_t *h) { delete reinterpret_cast<Poller *>(h); });
}

const char *eventName(int t) {
  switch (t) {
    case IBV_EVENT_CQ_ERR: return "CQ_ERR"; case IBV_EVENT_QP_FATAL: return "QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "QP_REQ_ERR"; case IBV_EVENT_QP_ACCESS_ERR: return "QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST: return "COMM_EST"; case IBV_EVENT_SQ_DRAINED: return "SQ_DRAINED";
    case IBV_EVENT_PATH_MIG: return "PATH_MIG"; case IBV_EVENT_PATH_MIG_ERR: return "PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL: return "DEVICE_FATAL"; case IBV_EVENT_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR: return "PORT_ERR"; case IBV_EVENT_LID_CHANGE: return "LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE: return "PKEY_CHANGE"; case IBV_EVENT_SM_CHANGE: return "SM_CHANGE";
    case IBV_EVENT_SRQ_ERR: return "SRQ_ERR"; case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER: return "CLIENT_REREGISTER"; case IBV_EVENT_GID_CHANGE: return "GID_CHANGE";
    default: return "UNKNOWN";
  }
}

void onAsyncReadable(uv_poll_t *h, int status, int) {
  Ctx *c = static_cast<Ctx *>(reinterpret_cast<Poller *>(h)->owner);
  if (!c || status < 0) return;
  Napi::Env env = c->env;
  Napi::HandleScope scope(env);
  for (;;) {
    ibv_async_event ev;
    if (lib.get_async_event(c->ctx, &ev) != 0) break; // EAGAIN: drained
    Napi::Object o = Napi::Object::New(env);
    o.Set("type", Napi::Number::New(env, ev.event_type));
    o.Set("name", Napi::String::New(env, eventName(ev.event_type)));
    switch (ev.event_type) {
      case IBV_EVENT_CQ_ERR:
        o.Set("cq", Napi::Number::New(env, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(ev.element.cq->cq_context))));
        break;
      case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR: case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG: case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
        o.Set("qp", Napi::Number::New(env, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(ev.element.qp->qp_context))));
        o.Set("qpNum", Napi::Number::New(env, ev.element.qp->qp_num));
        break;
      case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE: case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER: case IBV_EVENT_GID_CHANGE:
        o.Set("portNum", Napi::Number::New(env, ev.element.port_num));
        break;
      default: break;
    }
    lib.ack_async_event(&ev);
    if (!c->onAsync.IsEmpty()) {
      try {
        c->onAsync.MakeCallback(env.Global(), {o}, *c->actx);
      } catch (const Napi::Error &) {
        // an exception in the listener is reported by Node (uncaughtException)
      }
    }
    if (ctxs.find(c->id) == ctxs.end()) break; // closed by the listener
  }
}

// open(name, onAsync) -> ctx handle
Napi::Value Open(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  if (!info[0].IsString()) throwType(env, "ibv_open_device", "device name must be a string");
  if (!info[1].IsFunction()) throwType(env, "ibv_open_device", "async event callback must be a function");
  std::string name = info[0].As<Napi::String>();
  int n = 0;
  errno = 0;
  ibv_device **list = lib.get_device_list(&n);
  if (!list) throwCall(env, "ibv_get_device_list", errno ? errno : ENODEV);
  ibv_device *dev = nullptr;
  for (int i = 0; i < n; i++)
    if (name == lib.get_device_name(list[i])) dev = list[i];
  if (!dev) {
    lib.free_device_list(list);
    Napi::Error e = Napi::Error::New(env, "ibv_open_device: no RDMA device named " + name);
    e.Set("code", Napi::String::New(env, "ENODEV"));
    e.Set("call", Napi::String::New(env, "ibv_open_device"));
    throw e;
  }
  errno = 0;
  ibv_context *ctx = lib.open_device(dev);
  int err = errno;
  lib.free_device_list(list);
  if (!ctx) throwCall(env, "ibv_open_device", err ? err : ENODEV, " on " + name);
  auto c = std::make_unique<Ctx>(env);
  c->id = nextId++;
  c->ctx = ctx;
  c->onAsync = Napi::Persistent(info[1].As<Napi::Function>());
  c->actx = std::make_unique<Napi::AsyncContext>(env, "smcscope:ibverbs:async");
  setNonblock(ctx->async_fd);
  uv_loop_t *loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  c->poller = new Poller();
  c->poller->owner = c.get();
  uv_poll_init(loop, &c->poller->poll, ctx->async_fd);
  uv_poll_start(&c->poller->poll, UV_READABLE, onAsyncReadable);
  uv_unref(reinterpret_cast<uv_handle_t *>(&c->poller->poll)); // async events alone keep nothing alive
  uint32_t id = c->id;
  ctxs[id] = std::move(c);
  return Napi::Number::New(env, id);
}

Napi::Value Close(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Ctx *c = lookup(env, ctxs, info[0], "ibv_close_device", "device");
  for (auto &kv : pds)
    if (kv.second->ctx == c->id) {
      Napi::Error e = Napi::Error::New(env, "ibv_close_device failed: protection domains are still allocated (EBUSY)");
      e.Set("code", Napi::String::New(env, "EBUSY"));
      e.Set("call", Napi::String::New(env, "ibv_close_device"));
      throw e;
    }
  for (auto &kv : cqs)
    if (kv.second->ctx == c->id) {
      Napi::Error e = Napi::Error::New(env, "ibv_close_device failed: completion queues still exist (EBUSY)");
      e.Set("code", Napi::String::New(env, "EBUSY"));
      e.Set("call", Napi::String::New(env, "ibv_close_device"));
      throw e;
    }
  closePoller(c->poller);
  c->poller = nullptr;
  int r = lib.close_device(c->ctx);
  ctxs.erase(c->id);
  if (r) throwCall(env, "ibv_close_device", r > 0 ? r : errno);
  return env.Undefined();
}

#define SETN(o, k, v) (o).Set(k, Napi::Number::New(env, static_cast<double>(v)))

Napi::Value QueryDevice(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Ctx *c = lookup(env, ctxs, info[0], "ibv_query_device", "device");
  ibv_device_attr a;
  memset(&a, 0, sizeof(a));
  int r = lib.query_device(c->ctx, &a);
  if (r) throwCall(env, "ibv_query_device", r);
  Napi::Object o = Napi::Object::New(env);
  o.Set("fwVer", Napi::String::New(env, a.fw_ver));
  o.Set("nodeGuid", Napi::BigInt::New(env, static_cast<uint64_t>(be64toh(a.node_guid))));
  o.Set("sysImageGuid", Napi::BigInt::New(env, static_cast<uint64_t>(be64toh(a.sys_image_guid))));
  o.Set("maxMrSize", Napi::BigInt::New(env, static_cast<uint64_t>(a.max_mr_size)));
  SETN(o, "vendorId", a.vendor_id); SETN(o, "vendorPartId", a.vendor_part_id); SETN(o, "hwVer", a.hw_ver);
  SETN(o, "maxQp", a.max_qp); SETN(o, "maxQpWr", a.max_qp_wr); SETN(o, "maxSge", a.max_sge);
  SETN(o, "maxCq", a.max_cq); SETN(o, "maxCqe", a.max_cqe); SETN(o, "maxMr", a.max_mr); SETN(o, "maxPd", a.max_pd);
  SETN(o, "maxQpRdAtom", a.max_qp_rd_atom); SETN(o, "maxQpInitRdAtom", a.max_qp_init_rd_atom);
  SETN(o, "physPortCnt", a.phys_port_cnt);
  return o;
}

uint8_t portArg(Napi::Env env, const Napi::Value &v, const char *call) {
  if (!v.IsNumber()) throwType(env, call, "port must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 1 && d <= 255) || d != static_cast<int>(d)) throwType(env, call, "port must be an integer 1-255");
  return static_cast<uint8_t>(d);
}

int queryPort(ibv_context *ctx, uint8_t port, ibv_port_attr *pa) {
  memset(pa, 0, sizeof(*pa));
  verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, pa, sizeof(*pa));
  return lib.query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr *>(pa));
}

Napi::Value QueryPort(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Ctx *c = lookup(env, ctxs, info[0], "ibv_query_port", "device");
  uint8_t port = portArg(env, info[1], "ibv_query_port");
  ibv_port_attr pa;
  int r = queryPort(c->ctx, port, &pa);
  if (r) throwCall(env, "ibv_query_port", r, " (port " + std::to_string(port) + ")");
  Napi::Object o = Napi::Object::New(env);
  SETN(o, "state", pa.state); SETN(o, "maxMtu", pa.max_mtu); SETN(o, "activeMtu", pa.active_mtu);
  SETN(o, "gidTblLen", pa.gid_tbl_len); SETN(o, "lid", pa.lid); SETN(o, "linkLayer", pa.link_layer);
  SETN(o, "portCapFlags", pa.port_cap_flags); SETN(o, "activeSpeed", pa.active_speed); SETN(o, "activeWidth", pa.active_width);
  return o;
}

// gid(ctx, port, index) -> { gid: Buffer(16), type?: 0 IB | 1 RoCE v1 | 2 RoCE v2, ndevIfindex? } | null
Napi::Value QueryGid(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Ctx *c = lookup(env, ctxs, info[0], "ibv_query_gid", "device");
  uint8_t port = portArg(env, info[1], "ibv_query_gid");
  if (!info[2].IsNumber()) throwType(env, "ibv_query_gid", "index must be a number");
  int index = info[2].As<Napi::Number>().Int32Value();
  if (index < 0) throwType(env, "ibv_query_gid", "index must be >= 0");
  Napi::Object o = Napi::Object::New(env);
  if (lib.query_gid_ex) {
    ibv_gid_entry e;
    memset(&e, 0, sizeof(e));
    int r = lib.query_gid_ex(c->ctx, port, static_cast<uint32_t>(index), &e, 0, sizeof(e));
    if (r == ENODATA || r == -ENODATA) return env.Null(); // empty entry
    if (r) throwCall(env, "ibv_query_gid_ex", r > 0 ? r : -r, " (port " + std::to_string(port) + " index " + std::to_string(index) + ")");
    o.Set("gid", Napi::Buffer<uint8_t>::Copy(env, e.gid.raw, 16));
    SETN(o, "type", e.gid_type);
    SETN(o, "ndevIfindex", e.ndev_ifindex);
    return o;
  }
  ibv_gid g;
  if (lib.query_gid(c->ctx, port, index, &g)) throwCall(env, "ibv_query_gid", errno ? errno : EINVAL);
  o.Set("gid", Napi::Buffer<uint8_t>::Copy(env, g.raw, 16));
  return o;
}

// ---------------------------------------------------------------------------------------------
// PD, MR
// ---------------------------------------------------------------------------------------------

Napi::Value AllocPd(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Ctx *c = lookup(env, ctxs, info[0], "ibv_alloc_pd", "device");
  errno = 0;
  ibv_pd *pd = lib.alloc_pd(c->ctx);
  if (!pd) throwCall(env, "ibv_alloc_pd", errno ? errno : ENOMEM);
  auto p = std::make_unique<Pd>();
  p->id = nextId++;
  p->pd = pd;
  p->ctx = c->id;
  uint32_t id = p->id;
  pds[id] = std::move(p);
  return Napi::Number::New(env, id);
}

Napi::Value DeallocPd(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Pd *p = lookup(env, pds, info[0], "ibv_dealloc_pd", "PD");
  int r = lib.dealloc_pd(p->pd);
  if (r) throwCall(env, "ibv_dealloc_pd", r, r == EBUSY ? " (memory regions or QPs still use it)" : "");
  pds.erase(p->id);
  return env.Undefined();
}

// regMr(pd, Uint8Array, access) -> { handle, lkey, rkey, addr: bigint }
Napi::Value RegMr(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Pd *p = lookup(env, pds, info[0], "ibv_reg_mr", "PD");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    throwType(env, "ibv_reg_mr", "buffer must be a Uint8Array (or Buffer)");
  if (!info[2].IsNumber()) throwType(env, "ibv_reg_mr", "access must be a number (Access flags)");
  Napi::Uint8Array buf = info[1].As<Napi::Uint8Array>();
  int access = info[2].As<Napi::Number>().Int32Value();
  if (access < 0 || access > 0xffff) throwType(env, "ibv_reg_mr", "access flags out of range");
  if (buf.ByteLength() == 0) throwType(env, "ibv_reg_mr", "buffer must not be empty");
  errno = 0;
  ibv_mr *mr = lib.reg_mr(p->pd, buf.Data(), buf.ByteLength(), access);
  if (!mr) throwCall(env, "ibv_reg_mr", errno ? errno : ENOMEM, " (" + std::to_string(buf.ByteLength()) + " bytes)");
  auto m = std::make_unique<Mr>();
  m->id = nextId++;
  m->mr = mr;
  m->pd = p->id;
  m->keep = Napi::Persistent(info[1]); // the memory stays alive while registered
  Napi::Object o = Napi::Object::New(env);
  o.Set("handle", Napi::Number::New(env, m->id));
  o.Set("lkey", Napi::Number::New(env, mr->lkey));
  o.Set("rkey", Napi::Number::New(env, mr->rkey));
  o.Set("addr", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(mr->addr))));
  uint32_t id = m->id;
  mrs[id] = std::move(m);
  return o;
}

Napi::Value DeregMr(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Mr *m = lookup(env, mrs, info[0], "ibv_dereg_mr", "MR");
  int r = lib.dereg_mr(m->mr);
  if (r) throwCall(env, "ibv_dereg_mr", r);
  mrs.erase(m->id); // drops the buffer reference
  return env.Undefined();
}

// ---------------------------------------------------------------------------------------------
// CQ with a completion channel polled by libuv
// ---------------------------------------------------------------------------------------------

Napi::Object wcObject(Napi::Env env, const ibv_wc &wc) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("wrId", Napi::BigInt::New(env, static_cast<uint64_t>(wc.wr_id)));
  SETN(o, "status", wc.status); SETN(o, "opcode", wc.opcode); SETN(o, "vendorErr", wc.vendor_err);
  SETN(o, "byteLen", wc.byte_len); SETN(o, "qpNum", wc.qp_num); SETN(o, "srcQp", wc.src_qp);
  SETN(o, "wcFlags", wc.wc_flags);
  if (wc.wc_flags & IBV_WC_WITH_IMM) SETN(o, "immData", be32toh(wc.imm_data));
  return o;
}

void drainCq(Cq *q) {
  Napi::Env env = q->env;
  Napi::HandleScope scope(env);
  std::vector<ibv_wc> all;
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(q->cq, 32, wc);
    if (n <= 0) break;
    all.insert(all.end(), wc, wc + n);
    if (n < 32) break;
  }
  if (all.empty()) return;
  Napi::Array arr = Napi::Array::New(env, all.size());
  for (size_t i = 0; i < all.size(); i++) arr.Set(static_cast<uint32_t>(i), wcObject(env, all[i]));
  try {
    q->onWc.MakeCallback(env.Global(), {arr}, *q->actx);
  } catch (const Napi::Error &) {
  }
}

void onCqReadable(uv_poll_t *h, int status, int) {
  Cq *q = static_cast<Cq *>(reinterpret_cast<Poller *>(h)->owner);
  if (!q || status < 0) return;
  uint32_t id = q->id;
  ibv_cq *evcq;
  void *evctx;
  while (lib.get_cq_event(q->ch, &evcq, &evctx) == 0) q->unacked++;
  if (q->unacked >= 64) { lib.ack_cq_events(q->cq, q->unacked); q->unacked = 0; }
  ibv_req_notify_cq(q->cq, 0); // re-arm first, then drain: nothing falls between
  drainCq(q);
  if (cqs.find(id) == cqs.end()) return; // destroyed in the callback
}

// createCq(ctx, cqe, onWc(wcs[])) -> { handle, cqe }
Napi::Value CreateCq(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Ctx *c = lookup(env, ctxs, info[0], "ibv_create_cq", "device");
  if (!info[1].IsNumber()) throwType(env, "ibv_create_cq", "cqe must be a number");
  int cqe = info[1].As<Napi::Number>().Int32Value();
  if (cqe < 1) throwType(env, "ibv_create_cq", "cqe must be >= 1");
  if (!info[2].IsFunction()) throwType(env, "ibv_create_cq", "completion callback must be a function");
  errno = 0;
  ibv_comp_channel *ch = lib.create_comp_channel(c->ctx);
  if (!ch) throwCall(env, "ibv_create_comp_channel", errno ? errno : ENOMEM);
  uint32_t id = nextId++;
  errno = 0;
  ibv_cq *cq = lib.create_cq(c->ctx, cqe, reinterpret_cast<void *>(static_cast<uintptr_t>(id)), ch, 0);
  if (!cq) {
    int e = errno ? errno : ENOMEM;
    lib.destroy_comp_channel(ch);
    throwCall(env, "ibv_create_cq", e, " (cqe " + std::to_string(cqe) + ")");
  }
  setNonblock(ch->fd);
  int r = ibv_req_notify_cq(cq, 0);
  if (r) {
    lib.destroy_cq(cq);
    lib.destroy_comp_channel(ch);
    throwCall(env, "ibv_req_notify_cq", r);
  }
  auto q = std::make_unique<Cq>(env);
  q->id = id;
  q->cq = cq;
  q->ch = ch;
  q->ctx = c->id;
  q->onWc = Napi::Persistent(info[2].As<Napi::Function>());
  q->actx = std::make_unique<Napi::AsyncContext>(env, "smcscope:ibverbs:cq");
  uv_loop_t *loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  q->poller = new Poller();
  q->poller->owner = q.get();
  uv_poll_init(loop, &q->poller->poll, ch->fd);
  uv_poll_start(&q->poller->poll, UV_READABLE, onCqReadable);
  Napi::Object o = Napi::Object::New(env);
  o.Set("handle", Napi::Number::New(env, id));
  o.Set("cqe", Napi::Number::New(env, cq->cqe));
  cqs[id] = std::move(q);
  return o;
}

// refCq(cq, bool): whether this CQ's poll handle keeps the event loop alive.
Napi::Value RefCq(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Cq *q = lookup(env, cqs, info[0], "ref_cq", "CQ");
  uv_handle_t *h = reinterpret_cast<uv_handle_t *>(&q->poller->poll);
  if (info[1].ToBoolean()) uv_ref(h); else uv_unref(h);
  return env.Undefined();
}

// pollCq(cq): drain now (completions go to the callback); used after destroy-time flushes.
Napi::Value PollCq(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Cq *q = lookup(env, cqs, info[0], "ibv_poll_cq", "CQ");
  drainCq(q);
  return env.Undefined();
}

Napi::Value DestroyCq(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Cq *q = lookup(env, cqs, info[0], "ibv_destroy_cq", "CQ");
  for (auto &kv : qps)
    if (kv.second->scq == q->id || kv.second->rcq == q->id) {
      Napi::Error e = Napi::Error::New(env, "ibv_destroy_cq failed: QPs still use this CQ (EBUSY)");
      e.Set("code", Napi::String::New(env, "EBUSY"));
      e.Set("call", Napi::String::New(env, "ibv_destroy_cq"));
      throw e;
    }
  closePoller(q->poller);
  q->poller = nullptr;
  ibv_cq *evcq;
  void *evctx;
  while (lib.get_cq_event(q->ch, &evcq, &evctx) == 0) q->unacked++;
  if (q->unacked) lib.ack_cq_events(q->cq, q->unacked);
  int r = lib.destroy_cq(q->cq);
  int r2 = lib.destroy_comp_channel(q->ch);
  cqs.erase(q->id);
  if (r) throwCall(env, "ibv_destroy_cq", r);
  if (r2) throwCall(env, "ibv_destroy_comp_channel", r2);
  return env.Undefined();
}

// ---------------------------------------------------------------------------------------------
// QP
// ---------------------------------------------------------------------------------------------

Napi::Object capObject(Napi::Env env, const ibv_qp_cap &cap) {
  Napi::Object o = Napi::Object::New(env);
  SETN(o, "maxSendWr", cap.max_send_wr); SETN(o, "maxRecvWr", cap.max_recv_wr);
  SETN(o, "maxSendSge", cap.max_send_sge); SETN(o, "maxRecvSge", cap.max_recv_sge);
  SETN(o, "maxInlineData", cap.max_inline_data);
  return o;
}

// createQp(pd, sendCq, recvCq, { maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, sqSigAll })
//   -> { handle, qpNum, cap }
Napi::Value CreateQp(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  const char *call = "ibv_create_qp";
  Pd *p = lookup(env, pds, info[0], call, "PD");
  Cq *s = lookup(env, cqs, info[1], call, "send CQ");
  Cq *r = lookup(env, cqs, info[2], call, "receive CQ");
  Napi::Object a = asObject(env, info[3], call, "capabilities");
  ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof(ia));
  uint32_t id = nextId++;
  ia.qp_context = reinterpret_cast<void *>(static_cast<uintptr_t>(id));
  ia.send_cq = s->cq;
  ia.recv_cq = r->cq;
  ia.qp_type = IBV_QPT_RC;
  ia.sq_sig_all = a.Get("sqSigAll").ToBoolean() ? 1 : 0;
  ia.cap.max_send_wr = u32(env, a, "maxSendWr", call, 0, true);
  ia.cap.max_recv_wr = u32(env, a, "maxRecvWr", call, 0, true);
  ia.cap.max_send_sge = u32(env, a, "maxSendSge", call, 1);
  ia.cap.max_recv_sge = u32(env, a, "maxRecvSge", call, 1);
  ia.cap.max_inline_data = u32(env, a, "maxInlineData", call, 0);
  errno = 0;
  ibv_qp *qp = lib.create_qp(p->pd, &ia);
  if (!qp) throwCall(env, call, errno ? errno : ENOMEM);
  auto q = std::make_unique<Qp>();
  q->id = id;
  q->qp = qp;
  q->pd = p->id;
  q->scq = s->id;
  q->rcq = r->id;
  q->maxInline = ia.cap.max_inline_data; // what the provider granted
  Napi::Object o = Napi::Object::New(env);
  o.Set("handle", Napi::Number::New(env, id));
  o.Set("qpNum", Napi::Number::New(env, qp->qp_num));
  o.Set("cap", capObject(env, ia.cap));
  qps[id] = std::move(q);
  return o;
}

// modifyQp(qp, attr, mask): attr uses the verbs interface's field names; ahAttr.grh.dgid is a
// 16-byte Uint8Array.
Napi::Value ModifyQp(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  const char *call = "ibv_modify_qp";
  Qp *q = lookup(env, qps, info[0], call, "QP");
  Napi::Object a = asObject(env, info[1], call, "attr");
  if (!info[2].IsNumber()) throwType(env, call, "mask must be a number");
  int mask = info[2].As<Napi::Number>().Int32Value();
  ibv_qp_attr at;
  memset(&at, 0, sizeof(at));
  at.qp_state = static_cast<ibv_qp_state>(u32(env, a, "qpState", call, 0));
  at.cur_qp_state = static_cast<ibv_qp_state>(u32(env, a, "curQpState", call, 0));
  at.path_mtu = static_cast<ibv_mtu>(u32(env, a, "pathMtu", call, 0));
  at.qkey = u32(env, a, "qkey", call, 0);
  at.rq_psn = u32(env, a, "rqPsn", call, 0);
  at.sq_psn = u32(env, a, "sqPsn", call, 0);
  at.dest_qp_num = u32(env, a, "destQpNum", call, 0);
  at.qp_access_flags = static_cast<int>(u32(env, a, "qpAccessFlags", call, 0));
  at.pkey_index = static_cast<uint16_t>(u32(env, a, "pkeyIndex", call, 0));
  at.port_num = static_cast<uint8_t>(u32(env, a, "portNum", call, 0));
  at.min_rnr_timer = static_cast<uint8_t>(u32(env, a, "minRnrTimer", call, 0));
  at.timeout = static_cast<uint8_t>(u32(env, a, "timeout", call, 0));
  at.retry_cnt = static_cast<uint8_t>(u32(env, a, "retryCnt", call, 0));
  at.rnr_retry = static_cast<uint8_t>(u32(env, a, "rnrRetry", call, 0));
  at.max_rd_atomic = static_cast<uint8_t>(u32(env, a, "maxRdAtomic", call, 0));
  at.max_dest_rd_atomic = static_cast<uint8_t>(u32(env, a, "maxDestRdAtomic", call, 0));
  at.path_mig_state = static_cast<ibv_mig_state>(u32(env, a, "pathMigState", call, 0));
  Napi::Value ahv = a.Get("ahAttr");
  if (!ahv.IsUndefined()) {
    Napi::Object ah = asObject(env, ahv, call, "ahAttr");
    at.ah_attr.is_global = ah.Get("isGlobal").ToBoolean() ? 1 : 0;
    at.ah_attr.dlid = static_cast<uint16_t>(u32(env, ah, "dlid", call, 0));
    at.ah_attr.sl = static_cast<uint8_t>(u32(env, ah, "sl", call, 0));
    at.ah_attr.port_num = static_cast<uint8_t>(u32(env, ah, "portNum", call, 1));
    Napi::Value gv = ah.Get("grh");
    if (!gv.IsUndefined()) {
      Napi::Object g = asObject(env, gv, call, "ahAttr.grh");
      Napi::Value d = g.Get("dgid");
      if (!d.IsTypedArray() || d.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array ||
          d.As<Napi::Uint8Array>().ByteLength() != 16)
        throwType(env, call, "ahAttr.grh.dgid must be 16 bytes");
      memcpy(at.ah_attr.grh.dgid.raw, d.As<Napi::Uint8Array>().Data(), 16);
      at.ah_attr.grh.sgid_index = static_cast<uint8_t>(u32(env, g, "sgidIndex", call, 0));
      at.ah_attr.grh.hop_limit = static_cast<uint8_t>(u32(env, g, "hopLimit", call, 64));
      at.ah_attr.grh.traffic_class = static_cast<uint8_t>(u32(env, g, "trafficClass", call, 0));
      at.ah_attr.grh.flow_label = u32(env, g, "flowLabel", call, 0);
    }
  }
  Napi::Value capv = a.Get("cap");
  if (!capv.IsUndefined()) {
    Napi::Object c = asObject(env, capv, call, "cap");
    at.cap.max_send_wr = u32(env, c, "maxSendWr", call, 0);
    at.cap.max_recv_wr = u32(env, c, "maxRecvWr", call, 0);
    at.cap.max_send_sge = u32(env, c, "maxSendSge", call, 0);
    at.cap.max_recv_sge = u32(env, c, "maxRecvSge", call, 0);
    at.cap.max_inline_data = u32(env, c, "maxInlineData", call, 0);
  }
  int r = lib.modify_qp(q->qp, &at, mask);
  if (r) throwCall(env, call, r, " (QP " + std::to_string(q->qp->qp_num) + ", mask 0x" + [&] {
    char b[16]; snprintf(b, sizeof b, "%x", mask); return std::string(b); }() + ")");
  return env.Undefined();
}

Napi::Value QueryQp(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Qp *q = lookup(env, qps, info[0], "ibv_query_qp", "QP");
  ibv_qp_attr at;
  ibv_qp_init_attr ia;
  memset(&at, 0, sizeof(at));
  memset(&ia, 0, sizeof(ia));
  int all = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_AV |
            IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |
            IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
            IBV_QP_CAP | IBV_QP_DEST_QPN;
  int r = lib.query_qp(q->qp, &at, all, &ia);
  if (r) throwCall(env, "ibv_query_qp", r);
  Napi::Object o = Napi::Object::New(env);
  SETN(o, "qpState", at.qp_state); SETN(o, "curQpState", at.cur_qp_state); SETN(o, "pathMtu", at.path_mtu);
  SETN(o, "rqPsn", at.rq_psn); SETN(o, "sqPsn", at.sq_psn); SETN(o, "destQpNum", at.dest_qp_num);
  SETN(o, "qpAccessFlags", at.qp_access_flags); SETN(o, "pkeyIndex", at.pkey_index); SETN(o, "portNum", at.port_num);
  SETN(o, "minRnrTimer", at.min_rnr_timer); SETN(o, "timeout", at.timeout); SETN(o, "retryCnt", at.retry_cnt);
  SETN(o, "rnrRetry", at.rnr_retry); SETN(o, "maxRdAtomic", at.max_rd_atomic); SETN(o, "maxDestRdAtomic", at.max_dest_rd_atomic);
  Napi::Object ah = Napi::Object::New(env);
  ah.Set("isGlobal", Napi::Boolean::New(env, at.ah_attr.is_global != 0));
  SETN(ah, "dlid", at.ah_attr.dlid); SETN(ah, "sl", at.ah_attr.sl); SETN(ah, "portNum", at.ah_attr.port_num);
  if (at.ah_attr.is_global) {
    Napi::Object g = Napi::Object::New(env);
    g.Set("dgid", Napi::Buffer<uint8_t>::Copy(env, at.ah_attr.grh.dgid.raw, 16));
    SETN(g, "sgidIndex", at.ah_attr.grh.sgid_index); SETN(g, "hopLimit", at.ah_attr.grh.hop_limit);
    SETN(g, "trafficClass", at.ah_attr.grh.traffic_class); SETN(g, "flowLabel", at.ah_attr.grh.flow_label);
    ah.Set("grh", g);
  }
  o.Set("ahAttr", ah);
  o.Set("cap", capObject(env, at.cap));
  return o;
}

Napi::Value DestroyQp(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  Qp *q = lookup(env, qps, info[0], "ibv_destroy_qp", "QP");
  int r = lib.destroy_qp(q->qp);
  if (r) throwCall(env, "ibv_destroy_qp", r);
  qps.erase(q->id);
  return env.Undefined();
}

// ---------------------------------------------------------------------------------------------
// Posting
// ---------------------------------------------------------------------------------------------

[[noreturn]] void throwPost(Napi::Env env, const char *call, int err, uint32_t bad, const std::string &why) {
  std::string msg = std::string(call) + " failed: " + (why.empty() ? strerror(err) : why) + " (" + errnoName(err) +
                    ", work request " + std::to_string(bad) + ")";
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, errnoName(err)));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("call", Napi::String::New(env, call));
  e.Set("badWr", Napi::Number::New(env, bad));
  throw e;
}

void readSges(Napi::Env env, const Napi::Value &v, std::vector<ibv_sge> &out, const char *call) {
  if (v.IsUndefined()) return;
  if (!v.IsArray()) throwType(env, call, "sgList must be an array");
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Object s = asObject(env, a.Get(i), call, "sge");
    ibv_sge g;
    g.addr = u64(env, s.Get("addr"), call, "sge.addr");
    g.length = u32(env, s, "length", call, 0, true);
    g.lkey = u32(env, s, "lkey", call, 0, true);
    out.push_back(g);
  }
}

// postSend(qp, wrs[]): wr = { wrId: bigint, opcode, sendFlags, immData?, rdma?: {remoteAddr, rkey},
//   sgList?: Sge[], inlineData?: Uint8Array }. Inline data is copied by the provider during the call.
Napi::Value PostSend(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  const char *call = "ibv_post_send";
  Qp *q = lookup(env, qps, info[0], call, "QP");
  if (!info[1].IsArray()) throwType(env, call, "work requests must be an array");
  Napi::Array arr = info[1].As<Napi::Array>();
  uint32_t n = arr.Length();
  if (n == 0) return env.Undefined();
  std::vector<ibv_send_wr> wrs(n);
  std::vector<std::vector<ibv_sge>> sges(n);
  std::vector<Napi::Uint8Array> keep; // inline payloads stay referenced during the call
  for (uint32_t i = 0; i < n; i++) {
    Napi::Object w = asObject(env, arr.Get(i), call, "work request");
    ibv_send_wr &wr = wrs[i];
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = u64(env, w.Get("wrId"), call, "wrId");
    wr.opcode = static_cast<ibv_wr_opcode>(u32(env, w, "opcode", call, 0, true));
    wr.send_flags = u32(env, w, "sendFlags", call, 0);
    if (wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
      wr.imm_data = htobe32(u32(env, w, "immData", call, 0, true));
    if (wr.opcode == IBV_WR_RDMA_WRITE || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || wr.opcode == IBV_WR_RDMA_READ) {
      Napi::Object r = asObject(env, w.Get("rdma"), call, "rdma (remoteAddr, rkey)");
      wr.wr.rdma.remote_addr = u64(env, r.Get("remoteAddr"), call, "rdma.remoteAddr");
      wr.wr.rdma.rkey = u32(env, r, "rkey", call, 0, true);
    }
    Napi::Value inl = w.Get("inlineData");
    if (!inl.IsUndefined()) {
      if (!inl.IsTypedArray() || inl.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
        throwType(env, call, "inlineData must be a Uint8Array");
      Napi::Uint8Array d = inl.As<Napi::Uint8Array>();
      if (!(wr.send_flags & IBV_SEND_INLINE)) throwPost(env, call, EINVAL, i, "inlineData without the INLINE flag");
      if (d.ByteLength() > q->maxInline)
        throwPost(env, call, EINVAL, i, std::to_string(d.ByteLength()) + " inline bytes > max_inline_data " + std::to_string(q->maxInline));
      keep.push_back(d);
      if (d.ByteLength()) sges[i].push_back(ibv_sge{reinterpret_cast<uint64_t>(d.Data()), static_cast<uint32_t>(d.ByteLength()), 0});
    } else {
      readSges(env, w.Get("sgList"), sges[i], call);
    }
    wr.sg_list = sges[i].empty() ? nullptr : sges[i].data();
    wr.num_sge = static_cast<int>(sges[i].size());
    wr.next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr *bad = nullptr;
  int r = ibv_post_send(q->qp, wrs.data(), &bad);
  if (r) throwPost(env, call, r, bad ? static_cast<uint32_t>(bad - wrs.data()) : 0, "");
  return env.Undefined();
}

Napi::Value PostRecv(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  need(env);
  const char *call = "ibv_post_recv";
  Qp *q = lookup(env, qps, info[0], call, "QP");
  if (!info[1].IsArray()) throwType(env, call, "work requests must be an array");
  Napi::Array arr = info[1].As<Napi::Array>();
  uint32_t n = arr.Length();
  if (n == 0) return env.Undefined();
  std::vector<ibv_recv_wr> wrs(n);
  std::vector<std::vector<ibv_sge>> sges(n);
  for (uint32_t i = 0; i < n; i++) {
    Napi::Object w = asObject(env, arr.Get(i), call, "work request");
    ibv_recv_wr &wr = wrs[i];
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = u64(env, w.Get("wrId"), call, "wrId");
    readSges(env, w.Get("sgList"), sges[i], call);
    wr.sg_list = sges[i].empty() ? nullptr : sges[i].data();
    wr.num_sge = static_cast<int>(sges[i].size());
    wr.next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr *bad = nullptr;
  int r = ibv_post_recv(q->qp, wrs.data(), &bad);
  if (r) throwPost(env, call, r, bad ? static_cast<uint32_t>(bad - wrs.data()) : 0, "");
  return env.Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("status", Napi::Function::New(env, Status));
  exports.Set("deviceList", Napi::Function::New(env, DeviceList));
  exports.Set("open", Napi::Function::New(env, Open));
  exports.Set("close", Napi::Function::New(env, Close));
  exports.Set("queryDevice", Napi::Function::New(env, QueryDevice));
  exports.Set("queryPort", Napi::Function::New(env, QueryPort));
  exports.Set("queryGid", Napi::Function::New(env, QueryGid));
  exports.Set("allocPd", Napi::Function::New(env, AllocPd));
  exports.Set("deallocPd", Napi::Function::New(env, DeallocPd));
  exports.Set("regMr", Napi::Function::New(env, RegMr));
  exports.Set("deregMr", Napi::Function::New(env, DeregMr));
  exports.Set("createCq", Napi::Function::New(env, CreateCq));
  exports.Set("refCq", Napi::Function::New(env, RefCq));
  exports.Set("pollCq", Napi::Function::New(env, PollCq));
  exports.Set("destroyCq", Napi::Function::New(env, DestroyCq));
  exports.Set("createQp", Napi::Function::New(env, CreateQp));
  exports.Set("modifyQp", Napi::Function::New(env, ModifyQp));
  exports.Set("queryQp", Napi::Function::New(env, QueryQp));
  exports.Set("destroyQp", Napi::Function::New(env, DestroyQp));
  exports.Set("postSend", Napi::Function::New(env, PostSend));
  exports.Set("postRecv", Napi::Function::New(env, PostRecv));
  return exports;
}

} // namespace

NODE_API_MODULE(verbs, Init)
