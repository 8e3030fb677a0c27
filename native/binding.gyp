# smcscope native addons, built by node-gyp from this folder (`npm run build:native`, and
# by `npm ci` through the package's "install" script). One target per addon:
#   pcap_live  - libpcap live reader + offline BPF matching (src/pcap_live.cc)
#   icrc       - CRC-32 with PCLMULQDQ for the RoCE ICRC on the replay path (src/icrc.c, no libraries)
{
  "target_defaults": {
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions"],
    "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
    "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED"]
  },
  "targets": [
    {
      "target_name": "pcap_live",
      "sources": ["src/pcap_live.cc"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "libraries": ["-lpcap"]
    },
    {
      "target_name": "icrc",
      "sources": ["src/icrc.c"],
      "cflags": ["-Wall", "-Wextra"]
    }
  ]
}
