// pcap_live: a small libpcap live reader for smcscope (node-addon-api).
//
// What `cap` (the npm libpcap binding) lacks and this addon adds: the kernel's capture
// timestamp (nanoseconds when libpcap can), caplen AND original length, pcap_stats (kernel
// drops), batching (one JS call per wake-up, not per packet), a poll handle on the Env's own
// libuv loop (so it also works in a worker thread), and offline BPF matching
// (pcap_compile + pcap_offline_filter) for frames read by the project's own file reader.
//
// Reading never busy-polls: a uv_poll_t watches pcap_get_selectable_fd() and the handle is
// non-blocking; on readable we pcap_dispatch() what the kernel has handed over.
//
// Batch layout handed to JS (host byte order), per packet:
//   u32 sec_lo, u32 sec_hi, u32 frac (ns or µs, see `nanosecond`), u32 caplen, u32 len, u32 0,
//   then caplen bytes padded to a multiple of 8.

#include <napi.h>
#include <uv.h>
#include <pcap/pcap.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/if_packet.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int kMaxPacketsPerDispatch = 4096;
constexpr size_t kMaxBatchBytes = 8u << 20;
constexpr int kMaxRoundsPerWakeup = 16;
constexpr size_t kRecordHeader = 24;

// DLT_ (what libpcap calls a link type at run time) <-> LINKTYPE_ (what files carry).
// They are equal except for a few historical values; these are the ones Linux uses.
int DltToLinktype(int dlt) {
  switch (dlt) {
    case DLT_RAW: return 101;          // LINKTYPE_RAW
    case 11: return 100;               // DLT_ATM_RFC1483 -> LINKTYPE_ATM_RFC1483
    default: return dlt;
  }
}

int LinktypeToDlt(int lt) {
  switch (lt) {
    case 101: return DLT_RAW;
    case 100: return 11;
    default: return lt;
  }
}

const char* ErrorCodeName(int rc) {
  switch (rc) {
    case PCAP_ERROR_NO_SUCH_DEVICE: return "ENODEV";
    case PCAP_ERROR_PERM_DENIED: return "EPERM";
    case PCAP_ERROR_PROMISC_PERM_DENIED: return "EPROMISC";
    case PCAP_ERROR_IFACE_NOT_UP: return "ENOTUP";
    case PCAP_ERROR_RFMON_NOTSUP: return "ERFMON";
    case PCAP_ERROR_CANTSET_TSTAMP_TYPE: return "ETSTAMP";
    case PCAP_ERROR_TSTAMP_PRECISION_NOTSUP: return "ETSTAMP";
    default: return "EPCAP";
  }
}

Napi::Error PcapError(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  return e;
}

std::string SockaddrToString(const struct sockaddr* sa) {
  if (sa == nullptr) return "";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

// ---------------------------------------------------------------------------------------
// Live capture handle

class LiveHandle : public Napi::ObjectWrap<LiveHandle> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "LiveHandle", {
      InstanceMethod<&LiveHandle::Open>("open"),
      InstanceMethod<&LiveHandle::Stats>("stats"),
      InstanceMethod<&LiveHandle::Flush>("flush"),
      InstanceMethod<&LiveHandle::Pause>("pause"),
      InstanceMethod<&LiveHandle::Resume>("resume"),
      InstanceMethod<&LiveHandle::Close>("close"),
    });
  }

  explicit LiveHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<LiveHandle>(info) {}

  ~LiveHandle() override { Release(); }

 private:
  pcap_t* p_ = nullptr;
  uv_poll_t* poll_ = nullptr;
  bool polling_ = false;
  bool draining_ = false;
  bool nano_ = false;
  bool cleanupHook_ = false;
  napi_env env_ = nullptr;
  Napi::FunctionReference onBatch_;
  std::unique_ptr<Napi::AsyncContext> ctx_;
  std::vector<uint8_t> batch_;
  uint32_t batchCount_ = 0;
  std::string error_;

  // open(device, opts, onBatch(buffer, count, error?)) -> info
  Napi::Value Open(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (p_ != nullptr) throw PcapError(env, "EPCAP", "already open");
    if (info.Length() < 3 || !info[0].IsString() || !info[1].IsObject() || !info[2].IsFunction()) {
      throw Napi::TypeError::New(env, "open(device: string, opts: object, onBatch: function)");
    }
    std::string device = info[0].As<Napi::String>();
    Napi::Object o = info[1].As<Napi::Object>();
    auto num = [&](const char* k, int64_t def) -> int64_t {
      Napi::Value v = o.Get(k);
      return v.IsNumber() ? v.As<Napi::Number>().Int64Value() : def;
    };
    auto flag = [&](const char* k, bool def) -> bool {
      Napi::Value v = o.Get(k);
      return v.IsBoolean() ? v.As<Napi::Boolean>().Value() : def;
    };
    int snaplen = static_cast<int>(num("snaplen", 262144));
    int bufferSize = static_cast<int>(num("bufferSize", 32 << 20));
    int timeoutMs = static_cast<int>(num("timeoutMs", 50));
    bool promisc = flag("promisc", true);
    bool immediate = flag("immediate", false);
    bool preferSll2 = flag("preferSll2", true);
    bool ignoreOutgoing = flag("ignoreOutgoing", false);
    std::string filter;
    if (o.Get("filter").IsString()) filter = o.Get("filter").As<Napi::String>();

    char errbuf[PCAP_ERRBUF_SIZE] = {0};
    pcap_t* p = pcap_create(device.c_str(), errbuf);
    if (p == nullptr) throw PcapError(env, "EPCAP", errbuf);
    pcap_set_snaplen(p, snaplen);
    pcap_set_promisc(p, promisc ? 1 : 0);
    pcap_set_timeout(p, timeoutMs);
    pcap_set_buffer_size(p, bufferSize);
    pcap_set_immediate_mode(p, immediate ? 1 : 0);
    pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO);  // falls back to µs if refused
    int rc = pcap_activate(p);
    std::string warning;
    if (rc < 0) {
      std::string msg = pcap_geterr(p);
      if (msg.empty()) msg = pcap_statustostr(rc);
      pcap_close(p);
      Napi::Error e = PcapError(env, ErrorCodeName(rc), msg);
      e.Set("status", Napi::Number::New(env, rc));
      throw e;
    }
    if (rc > 0) {
      warning = pcap_geterr(p);
      if (warning.empty()) warning = pcap_statustostr(rc);
    }
    int dlt = pcap_datalink(p);
    if (preferSll2 && dlt == DLT_LINUX_SLL) {
      // `any`: SLL2 carries the interface index (tcpdump 4.99 does the same).
      int* dlts = nullptr;
      int n = pcap_list_datalinks(p, &dlts);
      for (int i = 0; i < n; i++) {
        if (dlts[i] == DLT_LINUX_SLL2 && pcap_set_datalink(p, DLT_LINUX_SLL2) == 0) { dlt = DLT_LINUX_SLL2; break; }
      }
      if (dlts != nullptr) pcap_free_datalinks(dlts);
    }
    if (!filter.empty()) {
      struct bpf_program prog;
      if (pcap_compile(p, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) < 0) {
        std::string msg = pcap_geterr(p);
        pcap_close(p);
        throw PcapError(env, "EFILTER", msg);
      }
      int src = pcap_setfilter(p, &prog);
      pcap_freecode(&prog);
      if (src < 0) {
        std::string msg = pcap_geterr(p);
        pcap_close(p);
        throw PcapError(env, "EFILTER", msg);
      }
    }
#ifdef PACKET_IGNORE_OUTGOING
    if (ignoreOutgoing) {
      // Loopback: every packet reaches packet sockets twice (out, then in) and libpcap drops
      // the outgoing copy in user space; the kernel can skip it (Linux >= 4.20), which
      // halves the ring space and copying per packet. Best effort.
      int one = 1;
      if (setsockopt(pcap_fileno(p), SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) ignoreOutgoing = false;
    }
#else
    ignoreOutgoing = false;
#endif
    if (pcap_setnonblock(p, 1, errbuf) < 0) {
      pcap_close(p);
      throw PcapError(env, "EPCAP", errbuf);
    }
    int fd = pcap_get_selectable_fd(p);
    if (fd < 0) {
      pcap_close(p);
      throw PcapError(env, "EPCAP", "this capture device has no selectable file descriptor");
    }
    uv_loop_t* loop = nullptr;
    if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
      pcap_close(p);
      throw PcapError(env, "EPCAP", "no event loop");
    }
    auto* poll = new uv_poll_t;
    if (uv_poll_init(loop, poll, fd) != 0) {
      delete poll;
      pcap_close(p);
      throw PcapError(env, "EPCAP", "uv_poll_init failed");
    }
    poll->data = this;
    p_ = p;
    poll_ = poll;
    env_ = env;
    nano_ = pcap_get_tstamp_precision(p) == PCAP_TSTAMP_PRECISION_NANO;
    onBatch_ = Napi::Persistent(info[2].As<Napi::Function>());
    ctx_ = std::make_unique<Napi::AsyncContext>(env, "smcscope:pcap_live");
    Ref();  // the JS object lives while the capture is open
    napi_add_env_cleanup_hook(env, &LiveHandle::EnvCleanup, this);
    cleanupHook_ = true;
    StartPoll();

    Napi::Object r = Napi::Object::New(env);
    r.Set("dlt", dlt);
    r.Set("linktype", DltToLinktype(dlt));
    const char* name = pcap_datalink_val_to_name(dlt);
    const char* desc = pcap_datalink_val_to_description(dlt);
    r.Set("dltName", name != nullptr ? name : std::to_string(dlt));
    r.Set("dltDescription", desc != nullptr ? desc : "");
    r.Set("snaplen", pcap_snapshot(p));
    r.Set("nanosecond", nano_);
    r.Set("fd", fd);
    r.Set("ignoreOutgoing", ignoreOutgoing);
    if (!warning.empty()) r.Set("warning", warning);
    return r;
  }

  void StartPoll() {
    if (poll_ == nullptr || polling_) return;
    uv_poll_start(poll_, UV_READABLE, &LiveHandle::OnReadable);
    polling_ = true;
  }

  void StopPoll() {
    if (poll_ == nullptr || !polling_) return;
    uv_poll_stop(poll_);
    polling_ = false;
  }

  static void OnReadable(uv_poll_t* h, int status, int /*events*/) {
    auto* self = static_cast<LiveHandle*>(h->data);
    if (self == nullptr || self->p_ == nullptr) return;
    Napi::Env env(self->env_);
    Napi::HandleScope scope(env);
    if (status < 0) {
      self->error_ = std::string("poll: ") + uv_strerror(status);
      self->StopPoll();
      self->DeliverError(true);
      return;
    }
    self->Drain(true);
  }

  static void OnPacket(u_char* user, const struct pcap_pkthdr* h, const u_char* bytes) {
    auto* self = reinterpret_cast<LiveHandle*>(user);
    size_t caplen = h->caplen;
    size_t padded = (caplen + 7) & ~static_cast<size_t>(7);
    size_t at = self->batch_.size();
    self->batch_.resize(at + kRecordHeader + padded);
    uint8_t* d = self->batch_.data() + at;
    uint64_t sec = static_cast<uint64_t>(static_cast<int64_t>(h->ts.tv_sec));
    uint32_t rec[6] = {
      static_cast<uint32_t>(sec & 0xffffffffu), static_cast<uint32_t>(sec >> 32),
      static_cast<uint32_t>(h->ts.tv_usec), static_cast<uint32_t>(caplen), static_cast<uint32_t>(h->len), 0,
    };
    std::memcpy(d, rec, sizeof rec);
    std::memcpy(d + kRecordHeader, bytes, caplen);
    if (padded > caplen) std::memset(d + kRecordHeader + caplen, 0, padded - caplen);
    self->batchCount_++;
  }

  // Read what the kernel has handed over and give it to JS in batches. `async`: called from
  // the poll callback (MakeCallback; a JS exception becomes an uncaught exception) rather
  // than from a JS call (flush(); the exception propagates to the caller).
  uint32_t Drain(bool async) {
    if (draining_ || p_ == nullptr) return 0;
    draining_ = true;
    // Reset on every exit, also when a JS exception unwinds through here (flush()).
    struct Guard {
      LiveHandle* s;
      ~Guard() { s->draining_ = false; if (s->p_ == nullptr) s->FreeCallbacks(); }
    } guard{this};
    uint32_t total = 0;
    for (int round = 0; round < kMaxRoundsPerWakeup && p_ != nullptr; round++) {
      batch_.clear();
      batchCount_ = 0;
      int n = 0;
      // Several dispatches into one batch (up to kMaxBatchBytes) before calling JS.
      while (batch_.size() < kMaxBatchBytes) {
        n = pcap_dispatch(p_, kMaxPacketsPerDispatch, &LiveHandle::OnPacket, reinterpret_cast<u_char*>(this));
        if (n <= 0) break;
      }
      if (n == PCAP_ERROR) error_ = pcap_geterr(p_);
      total += batchCount_;
      bool more = n > 0;  // stopped because the batch is full: there may be more
      if (batchCount_ > 0) {
        if (!Deliver(async)) break;
      }
      if (!error_.empty()) {
        StopPoll();
        DeliverError(async);
        break;
      }
      if (!more) break;
    }
    return total;
  }

  bool Deliver(bool async) {
    Napi::Env env(env_);
    Napi::Buffer<uint8_t> buf = Napi::Buffer<uint8_t>::Copy(env, batch_.data(), batch_.size());
    Napi::Number count = Napi::Number::New(env, batchCount_);
    batch_.clear();
    batchCount_ = 0;
    if (!async) {
      onBatch_.Call(Value(), {buf, count});  // a JS exception propagates to flush()'s caller
      return p_ != nullptr;
    }
    try {
      onBatch_.MakeCallback(Value(), {buf, count}, *ctx_);
    } catch (const Napi::Error& e) {
      napi_fatal_exception(env, e.Value());
      return false;
    }
    return p_ != nullptr;  // JS may have closed the handle
  }

  void DeliverError(bool async) {
    Napi::Env env(env_);
    Napi::Error e = PcapError(env, "EPCAP", error_);
    if (!async) { onBatch_.Call(Value(), {env.Null(), Napi::Number::New(env, 0), e.Value()}); return; }
    try {
      onBatch_.MakeCallback(Value(), {env.Null(), Napi::Number::New(env, 0), e.Value()}, *ctx_);
    } catch (const Napi::Error& ex) {
      napi_fatal_exception(env, ex.Value());
    }
  }

  // flush(): synchronously deliver whatever is readable now; returns the number of packets.
  Napi::Value Flush(const Napi::CallbackInfo& info) {
    if (p_ == nullptr) return Napi::Number::New(info.Env(), 0);
    return Napi::Number::New(info.Env(), Drain(false));
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (p_ == nullptr) throw PcapError(env, "EPCAP", "capture is closed");
    struct pcap_stat ps;
    std::memset(&ps, 0, sizeof ps);
    if (pcap_stats(p_, &ps) < 0) throw PcapError(env, "EPCAP", pcap_geterr(p_));
    Napi::Object r = Napi::Object::New(env);
    r.Set("received", static_cast<double>(ps.ps_recv));
    r.Set("dropped", static_cast<double>(ps.ps_drop));
    r.Set("ifDropped", static_cast<double>(ps.ps_ifdrop));
    return r;
  }

  // pause()/resume(): stop/start watching the descriptor. While paused the kernel ring
  // fills, then the kernel drops (and counts) — backpressure that shows in stats().
  Napi::Value Pause(const Napi::CallbackInfo& info) { StopPoll(); return info.Env().Undefined(); }
  Napi::Value Resume(const Napi::CallbackInfo& info) { if (p_ != nullptr) StartPoll(); return info.Env().Undefined(); }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    bool wasOpen = p_ != nullptr;
    Release();
    if (wasOpen) Unref();
    return info.Env().Undefined();
  }

  static void EnvCleanup(void* arg) {
    auto* self = static_cast<LiveHandle*>(arg);
    self->cleanupHook_ = false;  // being run: must not be removed
    self->Release();
  }

  void Release() {
    if (poll_ != nullptr) {
      StopPoll();
      poll_->data = nullptr;
      uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
      poll_ = nullptr;
    }
    if (p_ != nullptr) {
      pcap_close(p_);
      p_ = nullptr;
    }
    if (cleanupHook_) {
      napi_remove_env_cleanup_hook(env_, &LiveHandle::EnvCleanup, this);
      cleanupHook_ = false;
    }
    if (!draining_) FreeCallbacks();  // else Drain() frees them once the JS call returned
  }

  void FreeCallbacks() {
    if (!onBatch_.IsEmpty()) onBatch_.Reset();
    ctx_.reset();
  }
};

// ---------------------------------------------------------------------------------------
// Offline BPF: pcap_compile for a link type + pcap_offline_filter on frames read elsewhere.

class BpfFilter : public Napi::ObjectWrap<BpfFilter> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "BpfFilter", {
      InstanceMethod<&BpfFilter::Matches>("matches"),
      InstanceMethod<&BpfFilter::Close>("close"),
    });
  }

  // new BpfFilter(linktype, snaplen, expression)
  explicit BpfFilter(const Napi::CallbackInfo& info) : Napi::ObjectWrap<BpfFilter>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsString()) {
      throw Napi::TypeError::New(env, "new BpfFilter(linktype: number, snaplen: number, expression: string)");
    }
    int lt = info[0].As<Napi::Number>().Int32Value();
    int snaplen = info[1].As<Napi::Number>().Int32Value();
    if (snaplen <= 0) snaplen = 262144;
    std::string expr = info[2].As<Napi::String>();
    pcap_t* dead = pcap_open_dead_with_tstamp_precision(LinktypeToDlt(lt), snaplen, PCAP_TSTAMP_PRECISION_NANO);
    if (dead == nullptr) throw PcapError(env, "EPCAP", "pcap_open_dead failed");
    if (pcap_compile(dead, &prog_, expr.c_str(), 1, PCAP_NETMASK_UNKNOWN) < 0) {
      std::string msg = pcap_geterr(dead);
      pcap_close(dead);
      throw PcapError(env, "EFILTER", msg);
    }
    pcap_close(dead);
    compiled_ = true;
  }

  ~BpfFilter() override { Free(); }

 private:
  struct bpf_program prog_ {};
  bool compiled_ = false;

  void Free() {
    if (compiled_) { pcap_freecode(&prog_); compiled_ = false; }
  }

  // matches(bytes: Uint8Array, origlen?: number): boolean
  Napi::Value Matches(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!compiled_) throw PcapError(env, "EPCAP", "filter is closed");
    if (info.Length() < 1 || !info[0].IsTypedArray()) throw Napi::TypeError::New(env, "matches(bytes: Uint8Array, origlen?: number)");
    Napi::TypedArray ta = info[0].As<Napi::TypedArray>();
    if (ta.TypedArrayType() != napi_uint8_array) throw Napi::TypeError::New(env, "matches(bytes: Uint8Array, origlen?: number)");
    Napi::Uint8Array u = ta.As<Napi::Uint8Array>();
    struct pcap_pkthdr h;
    std::memset(&h, 0, sizeof h);
    h.caplen = static_cast<bpf_u_int32>(u.ElementLength());
    h.len = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Uint32Value() : h.caplen;
    if (h.len < h.caplen) h.len = h.caplen;
    static const u_char kEmpty[1] = {0};
    const u_char* data = h.caplen > 0 ? u.Data() : kEmpty;
    return Napi::Boolean::New(env, pcap_offline_filter(&prog_, &h, data) != 0);
  }

  Napi::Value Close(const Napi::CallbackInfo& info) { Free(); return info.Env().Undefined(); }
};

// ---------------------------------------------------------------------------------------

Napi::Value FindAllDevs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  pcap_if_t* all = nullptr;
  if (pcap_findalldevs(&all, errbuf) < 0) throw PcapError(env, "EPCAP", errbuf);
  Napi::Array out = Napi::Array::New(env);
  uint32_t i = 0;
  for (pcap_if_t* d = all; d != nullptr; d = d->next) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", d->name != nullptr ? d->name : "");
    if (d->description != nullptr) o.Set("description", d->description);
    o.Set("flags", static_cast<double>(d->flags));
    o.Set("loopback", (d->flags & PCAP_IF_LOOPBACK) != 0);
    o.Set("up", (d->flags & PCAP_IF_UP) != 0);
    o.Set("running", (d->flags & PCAP_IF_RUNNING) != 0);
    o.Set("wireless", (d->flags & PCAP_IF_WIRELESS) != 0);
    const char* status = "unknown";
    switch (d->flags & PCAP_IF_CONNECTION_STATUS) {
      case PCAP_IF_CONNECTION_STATUS_CONNECTED: status = "connected"; break;
      case PCAP_IF_CONNECTION_STATUS_DISCONNECTED: status = "disconnected"; break;
      case PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE: status = "not applicable"; break;
      default: break;
    }
    o.Set("connection", status);
    Napi::Array addrs = Napi::Array::New(env);
    uint32_t j = 0;
    for (pcap_addr_t* a = d->addresses; a != nullptr; a = a->next) {
      std::string s = SockaddrToString(a->addr);
      if (!s.empty()) addrs.Set(j++, s);
    }
    o.Set("addresses", addrs);
    out.Set(i++, o);
  }
  pcap_freealldevs(all);
  return out;
}

Napi::Value DltName(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int lt = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : -1;
  const char* n = pcap_datalink_val_to_name(LinktypeToDlt(lt));
  return n != nullptr ? Napi::Value(Napi::String::New(env, n)) : env.Null();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("LiveHandle", LiveHandle::Init(env));
  exports.Set("BpfFilter", BpfFilter::Init(env));
  exports.Set("findAllDevs", Napi::Function::New(env, FindAllDevs));
  exports.Set("dltName", Napi::Function::New(env, DltName));
  exports.Set("libVersion", Napi::String::New(env, pcap_lib_version()));
  exports.Set("recordHeaderBytes", Napi::Number::New(env, static_cast<double>(kRecordHeader)));
  return exports;
}

}  // namespace

NODE_API_MODULE(pcap_live, Init)
