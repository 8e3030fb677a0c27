# uroce's socket helper (see uroce_sock.c; loaded by endpoint/verbs/uroce/sockets.ts): built by node-gyp with the project's native addons.
{
  "targets": [
    {
      "target_name": "uroce_sock",
      "sources": ["uroce_sock.c"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
