// uroce: userspace RoCEv2 RC engine over a UDP socket (see docs/uroce.md).
export { openUroce, UroceDevice, UrocePd, UroceMr, type UroceOptions } from './device.js';
export { UroceQp, psnDiff, roceSourcePort } from './qp.js';
export { UroceEngine, type EngineStats } from './engine.js';
export { FaultInjector, type FaultConfig } from './faults.js';
export { IcrcChecker, NetHeader, solveIpId } from './icrc.js';
export { loadSockHelper, sockHelperError, sockHelperPath } from './sockets.js';
