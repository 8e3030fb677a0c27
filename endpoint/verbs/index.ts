// The verbs interface (types.ts) and its providers. Code above endpoint/verbs/ imports from
// here and opens a device through openDevice(), so the provider is a configuration choice:
//
//   openDevice({ provider: 'uroce', address: '127.0.0.1' })        userspace RoCEv2 over UDP
//   openDevice({ provider: 'ibverbs', device: 'rxe0', gidIndex: 3 }) RDMA through libibverbs
//
// sourceGid(dev) gives the GID (and its index, for ahAttr.grh.sgidIndex) a device's QPs speak
// from: uroce's only GID, or the ibverbs device's configured / IPv4-mapped RoCE v2 GID.
export * from './types.js';
export { CompletionQueue } from './cq.js';
export { checkTransition } from './qpstate.js';
import type { Device, GidEntry } from './types.js';
import { openUroce, type UroceOptions } from './uroce/device.js';
import type { IbverbsOptions } from './ibverbs/index.js';

export type DeviceSpec =
  | ({ provider: 'uroce' } & UroceOptions)
  | ({ provider: 'ibverbs' } & IbverbsOptions);

/** Open a device of the given provider. The ibverbs module (and its native addon) is loaded
 *  only when asked for; it throws IbverbsUnavailableError (one line) where RDMA cannot be used. */
export async function openDevice(spec: DeviceSpec): Promise<Device> {
  switch (spec?.provider) {
    case 'uroce': return openUroce(spec);
    case 'ibverbs': {
      const { provider: _p, ...opts } = spec;
      const { openIbverbs } = await import('./ibverbs/index.js');
      return openIbverbs(opts);
    }
    default: throw new Error(`unknown verbs provider ${String((spec as { provider?: unknown } | undefined)?.provider)} (uroce, ibverbs)`);
  }
}

/** The GID a device's QPs use as source on `port` (ahAttr.grh.sgidIndex = its index). */
export function sourceGid(dev: Device, port = 1): GidEntry {
  const d = dev as Device & { sourceGid?: (port: number) => GidEntry };
  if (typeof d.sourceGid === 'function') return d.sourceGid(port);
  return { index: 0, gid: dev.queryGid(port, 0), type: dev.queryGidType(port, 0) };
}
