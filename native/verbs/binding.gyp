# smcscope libibverbs addon (its own gyp project, separate from native/binding.gyp):
#   npm_config_nodedir=/usr node-gyp rebuild -C native/verbs
# libibverbs is opened with dlopen at run time (not linked): the addon loads where RDMA is
# absent. Building needs the headers only (Debian: libibverbs-dev).
{
  "targets": [
    {
      "target_name": "verbs",
      "sources": ["src/verbs.cc"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "libraries": ["-ldl"]
    }
  ]
}
