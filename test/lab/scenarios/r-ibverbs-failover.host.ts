// Host-side part of scenario r-ibverbs-failover: the same staging as q-ibverbs-kernel (node, the
// ibverbs addon, the TCP option helper and the bundled q-ibverbs-kernel.guest.ts into /out).
import './q-ibverbs-kernel.host.js';
