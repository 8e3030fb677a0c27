# uroce's socket helper (see uroce_sock.c; loaded by endpoint/verbs/uroce/sockets.ts): built by node-gyp with the project's native addons.
# icrc_arith.c compiles the project's CRC-32 (../src/icrc.c) into it for the ICRC arithmetic (round 14).
{
  "targets": [
    {
      "target_name": "uroce_sock",
      "sources": ["uroce_sock.c", "icrc_arith.c"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
