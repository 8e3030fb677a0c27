// Host-side part of scenario s-ibverbs-failover-server: the same staging as q-ibverbs-kernel.
import './q-ibverbs-kernel.host.js';
