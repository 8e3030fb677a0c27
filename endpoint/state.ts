// The endpoint's state as others see it: one typed schema for what `SmcStack.snapshot()` returns,
// what the control socket serves (`state`/`watch`), what `--state-json` writes and what
// `smcdump --state` / `smcdump --endpoint` read back. Over JSON, bigints and RMB addresses are
// hex strings (endpoint/control.ts's replacer); the readers accept numbers or hex strings.

import type { CdcConnectionState } from './cdc/connection.js';
import type { GroupState, GroupType, LinkState, Role } from './llc/linkgroup.js';

export type { CdcConnectionState };

/** One link (RC QP pair) of a link group. */
export interface LinkSnapshot {
  id: number;
  state: LinkState;
  /** Local GID (the device of this link). */
  gid: string;
  qpn: number;
  /** Our initial send PSN. */
  psn: number;
  /** The peer's QP, once CONFIRM LINK / ADD LINK told us. */
  peer: { gid: string; mac: string; qpn: number; psn: number; mtu: number } | undefined;
  /** Link user id as on the wire (CONFIRM LINK's link_uid: group number << 8 | link id). */
  uid: number;
  stats: { sent: number; received: number; writes: number; writeBytes: number };
}

/** One link group: its links, the connections multiplexed over them, its RMBs. */
export interface LinkGroupSnapshot {
  name: string;
  role: Role;
  version: 1 | 2;
  release: number;
  state: GroupState;
  peerId: string;
  maxConns: number;
  maxLinks: number;
  /** The group's type as Linux names it (smc_core.h enum smc_lgr_type), from its active links. */
  type: GroupType;
  links: LinkSnapshot[];
  conns: Array<{ token: number; peerToken: number; peerRmbeSize: number; rtokens: Array<{ link: number; rkey: number; addr: string }> }>;
  rmbs: Array<{ size: number; rkey: number; addr: string; inUse: boolean; confirmed: boolean }>;
  /** sendErrors: LLC sends and flows that failed where nobody waited for them (lastSendError says the last). */
  stats: { llcIn: number; llcOut: number; cdcIn: number; cdcDropped: number; rejectsSent: number; sendErrors: number };
  lastSendError?: string;
}

/** One connection: its key ("LG2/5"), its group, and the data path's state. */
export interface ConnectionSnapshot extends CdcConnectionState {
  key: string;
  linkGroup: string;
  /** The connection's TCP socket (the CLC handshake ran over it), "ip:port" each end, like ss. */
  tcp?: { local: string; remote: string };
  /** ISO time of the handshake's end (live connections). */
  since?: string;
  /** ISO time it closed (closedConnections). */
  closedAt?: string;
}

/** The whole endpoint. */
export interface EndpointSnapshot {
  device: string;
  provider: string;
  peerId: string;
  gid: string;
  mac: string;
  mtu: number;
  /** 'ebpf', 'ignored' or 'unavailable: why'. */
  tcpOption: string;
  linkGroups: LinkGroupSnapshot[];
  connections: ConnectionSnapshot[];
  /** The last 256 closed connections, oldest first. */
  closedConnections: ConnectionSnapshot[];
}
