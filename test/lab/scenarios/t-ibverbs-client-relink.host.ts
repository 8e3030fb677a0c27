// Host-side part of scenario t-ibverbs-client-relink: the same staging as q-ibverbs-kernel.
import './q-ibverbs-kernel.host.js';
