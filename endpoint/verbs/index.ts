// The verbs interface (types.ts) and its providers. Code above endpoint/verbs/ imports from
// here and opens a device through openDevice(), so the provider is a configuration choice.
export * from './types.js';
export { CompletionQueue } from './cq.js';
export { checkTransition } from './qpstate.js';
import type { Device } from './types.js';
import { openUroce, type UroceOptions } from './uroce/device.js';

export type DeviceSpec = { provider: 'uroce' } & UroceOptions;

/** Open a device of the given provider ('uroce' today; 'ibverbs' when the native addon lands). */
export async function openDevice(spec: DeviceSpec): Promise<Device> {
  switch (spec.provider) {
    case 'uroce': return openUroce(spec);
    default: throw new Error(`unknown verbs provider ${(spec as { provider: string }).provider}`);
  }
}
